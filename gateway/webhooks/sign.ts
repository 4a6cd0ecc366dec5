import { Webhook } from "standardwebhooks";

/**
 * Standard Webhooks signing. The `standardwebhooks` package is pure JavaScript
 * (@stablelib/base64 and fast-sha256, no Node built-ins), so this runs in workerd too.
 */
export interface WebhookHeaders {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
}

/**
 * Signs one attempt. `msgId` stays the same across retries of one delivery (receivers use it
 * to deduplicate); `at` is the attempt's time, which receivers check against their clock.
 */
export function signWebhook(
  secret: string,
  msgId: string,
  at: number,
  body: string,
): WebhookHeaders {
  const timestamp = new Date(at);
  return {
    "webhook-id": msgId,
    "webhook-timestamp": String(Math.floor(at / 1000)),
    "webhook-signature": new Webhook(secret).sign(msgId, timestamp, body),
  };
}
