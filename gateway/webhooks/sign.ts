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
 * With several secrets (a rotation's overlap: the new one first, then the old one) the
 * header carries one signature per secret, space-separated, as the spec allows; a receiver
 * that knows either secret verifies it.
 */
export function signWebhook(
  secrets: string | readonly string[],
  msgId: string,
  at: number,
  body: string,
): WebhookHeaders {
  const timestamp = new Date(at);
  const keys = typeof secrets === "string" ? [secrets] : secrets;
  if (keys.length === 0) throw new Error("no webhook signing secret");
  return {
    "webhook-id": msgId,
    "webhook-timestamp": String(Math.floor(at / 1000)),
    "webhook-signature": keys
      .map((secret) => new Webhook(secret).sign(msgId, timestamp, body))
      .join(" "),
  };
}
