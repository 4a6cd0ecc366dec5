import { z } from "zod";
import { WebhookSecret } from "./webhook.ts";
import { WebhookEventType } from "./webhook-subscription.ts";

/**
 * The webhook management API: a job's delivery log and redelivery, secret rotation, and
 * endpoint health. Instants are ISO 8601 strings, as everywhere in the public API.
 */

export const WebhookDeliveryId = z
  .string()
  .regex(/^whd_[0-9a-z]{26}$/, "a webhook delivery id (whd_…)");

/**
 * Why an attempt did not deliver, from a fixed set. How a connection failed (addresses,
 * what a name resolved to) is never shown here: it is in the gateway operator's log.
 */
export const WebhookAttemptReason = z
  .enum([
    "timeout",
    "connection_failed",
    "tls_error",
    "refused_by_policy",
    "http_status",
    "endpoint_disabled",
    "no_signing_secret",
  ])
  .describe(
    "timeout: no answer in time; connection_failed: no connection (name not found, refused, reset); tls_error: the TLS handshake failed; refused_by_policy: not sent, the URL or the address it resolves to is not allowed; http_status: the receiver answered other than 2xx (`status_code`); endpoint_disabled: not sent, the endpoint is disabled; no_signing_secret: not sent, the tenant has no webhook secret.",
  );
export type WebhookAttemptReason = z.infer<typeof WebhookAttemptReason>;

export const WebhookAttempt = z.object({
  /** 1 for the first attempt; redeliveries continue the count. */
  n: z.number().int().positive(),
  at: z.iso.datetime(),
  /** Null when no response arrived (refused, timed out, not sent). */
  status_code: z.number().int().nullable(),
  /** Null on 2xx; otherwise why, from a fixed set. */
  reason: WebhookAttemptReason.nullable(),
  /**
   * Null on 2xx; otherwise a sentence for `reason`, with at most a short excerpt of the
   * receiver's body for `http_status`.
   */
  error: z.string().nullable(),
  duration_ms: z.number().int().nonnegative(),
});
export type WebhookAttempt = z.infer<typeof WebhookAttempt>;

/** skipped: not sent, because the endpoint was disabled (the attempt's `error` says why). */
export const WebhookDeliveryState = z.enum(["pending", "delivered", "failed", "skipped"]);
export type WebhookDeliveryState = z.infer<typeof WebhookDeliveryState>;

/**
 * Every `type` a delivery can carry: a job's changes, a batch's end, a budget's threshold
 * (each payload's own schema: webhook.ts, batch.ts, usage.ts).
 */
export const WebhookDeliveryEventType = z.enum([
  ...WebhookEventType.options,
  "batch.completed",
  "usage.threshold",
]);
export type WebhookDeliveryEventType = z.infer<typeof WebhookDeliveryEventType>;

export const WebhookDelivery = z.object({
  object: z.literal("webhook_delivery"),
  /** Also the `webhook-id` header of every attempt. */
  id: WebhookDeliveryId,
  /** The job's id; for `batch.completed`, the batch's (`GET /v1/batches/{id}/webhooks`). */
  job_id: z.string(),
  event_type: WebhookDeliveryEventType,
  url: z.string(),
  state: WebhookDeliveryState,
  attempt_count: z.number().int().nonnegative(),
  next_attempt_at: z.iso.datetime().nullable(),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
  attempts: z.array(WebhookAttempt),
});
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;

export const WebhookDeliveryList = z.object({
  object: z.literal("list"),
  data: z.array(WebhookDelivery),
});
export type WebhookDeliveryList = z.infer<typeof WebhookDeliveryList>;

/** `GET /v1/webhooks/secret` and the rotation's answer. */
export const WebhookSecretDetails = WebhookSecret.extend({
  /** While set, deliveries are signed with the previous secret too (until then). */
  previous_secret_expires_at: z.iso.datetime().nullable(),
});
export type WebhookSecretDetails = z.infer<typeof WebhookSecretDetails>;

export const WebhookSecretRotateRequest = z.strictObject({
  /** How long the old secret keeps signing beside the new one; 0 retires it now. */
  overlap_seconds: z
    .number()
    .int()
    .min(0)
    .max(7 * 24 * 3600)
    .optional()
    .describe("Default 86400 (24 h); at most 7 days; 0 retires the old secret at once."),
});
export type WebhookSecretRotateRequest = z.infer<typeof WebhookSecretRotateRequest>;

export const WebhookEndpointStatus = z.enum(["healthy", "failing", "disabled"]);

export const WebhookEndpoint = z.object({
  object: z.literal("webhook_endpoint"),
  url: z.string(),
  status: WebhookEndpointStatus,
  /** Start of the current unbroken run of failed attempts. */
  failing_since: z.iso.datetime().nullable(),
  consecutive_failures: z.number().int().nonnegative(),
  last_failure_at: z.iso.datetime().nullable(),
  last_success_at: z.iso.datetime().nullable(),
  last_error: z.string().nullable(),
  disabled_at: z.iso.datetime().nullable(),
  disabled_reason: z.string().nullable(),
});
export type WebhookEndpoint = z.infer<typeof WebhookEndpoint>;

export const WebhookEndpointList = z.object({
  object: z.literal("list"),
  data: z.array(WebhookEndpoint),
});
export type WebhookEndpointList = z.infer<typeof WebhookEndpointList>;

export const WebhookEndpointEnableRequest = z.strictObject({
  url: z.string().min(1).max(2048),
});
export type WebhookEndpointEnableRequest = z.infer<typeof WebhookEndpointEnableRequest>;
