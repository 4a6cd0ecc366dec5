import { Webhook } from "standardwebhooks";
import type {
  BatchWebhookPayload,
  UsageThresholdPayload,
  WebhookPayload,
} from "../shared/protocol/index.ts";
import { WebhookVerificationError } from "./errors.ts";

/**
 * Whatever a delivery carries: a job's change (`job.*`), a batch's end (`batch.completed`) or
 * a budget threshold (`usage.threshold`), told apart by `type`. One endpoint may get all
 * three: usage thresholds go to every endpoint the tenant's jobs use.
 */
export type WebhookEvent = WebhookPayload | BatchWebhookPayload | UsageThresholdPayload;

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/**
 * `webhooks.verify`: checks a delivery's Standard Webhooks signature and timestamp with
 * the tenant's `whsec_…` secret and returns the parsed payload; throws a
 * `WebhookVerificationError` when it is forged, altered or stale. Pass the raw body text, exactly as received.
 */
export function verifyWebhook(
  payload: string,
  headers: WebhookHeaders,
  secret: string,
): WebhookEvent {
  const pick = headerReader(headers);
  try {
    return new Webhook(secret).verify(payload, {
      "webhook-id": pick("webhook-id"),
      "webhook-timestamp": pick("webhook-timestamp"),
      "webhook-signature": pick("webhook-signature"),
    }) as WebhookEvent;
  } catch (error) {
    // standardwebhooks' own error class: turned into the SDK's, which callers catch with
    // every other GantryError.
    const why = error instanceof Error ? error.message : String(error);
    throw new WebhookVerificationError(`webhook not verified: ${why}`, { cause: error });
  }
}

/**
 * Reads a header by its lowercase name. Header names have no case: a proxy may have sent
 * `Webhook-Id` (Go's canonical form), and a plain object keeps whatever case arrived;
 * `Headers` already ignores it.
 */
function headerReader(headers: WebhookHeaders): (name: string) => string {
  if (headers instanceof Headers) return (name) => headers.get(name) ?? "";
  const byName = new Map(Object.entries(headers).map(([key, value]) => [key.toLowerCase(), value]));
  return (name) => {
    const value = byName.get(name);
    return Array.isArray(value) ? (value[0] ?? "") : (value ?? "");
  };
}
