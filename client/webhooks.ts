import { Webhook } from "standardwebhooks";
import type {
  BatchWebhookPayload,
  UsageThresholdPayload,
  WebhookPayload,
} from "../shared/protocol/index.ts";

/**
 * Whatever a delivery carries: a job's change (`job.*`), a batch's end (`batch.completed`) or
 * a budget threshold (`usage.threshold`), told apart by `type`. One endpoint may get all
 * three: usage thresholds go to every endpoint the tenant's jobs use.
 */
export type WebhookEvent = WebhookPayload | BatchWebhookPayload | UsageThresholdPayload;

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/**
 * `webhooks.verify`: checks a delivery's Standard Webhooks signature and timestamp with
 * the tenant's `whsec_…` secret and returns the parsed payload; throws when it is forged,
 * altered or stale. Pass the raw body text, exactly as received.
 */
export function verifyWebhook(
  payload: string,
  headers: WebhookHeaders,
  secret: string,
): WebhookEvent {
  const pick = (name: string): string => {
    const value =
      headers instanceof Headers
        ? headers.get(name)
        : (headers[name] ?? headers[name.toLowerCase()]);
    return Array.isArray(value) ? (value[0] ?? "") : (value ?? "");
  };
  return new Webhook(secret).verify(payload, {
    "webhook-id": pick("webhook-id"),
    "webhook-timestamp": pick("webhook-timestamp"),
    "webhook-signature": pick("webhook-signature"),
  }) as WebhookEvent;
}
