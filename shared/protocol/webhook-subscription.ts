import { z } from "zod";

/** What a job's webhook asks for (`POST /v1/jobs` `webhook`): where, and which changes. */

export const WebhookEventType = z.enum([
  "job.running",
  "job.succeeded",
  "job.failed",
  "job.canceled",
  "job.expired",
]);
export type WebhookEventType = z.infer<typeof WebhookEventType>;

/** The changes a webhook that names no `events` gets: how the job ended. */
export const DEFAULT_WEBHOOK_EVENTS: readonly WebhookEventType[] = [
  "job.succeeded",
  "job.failed",
  "job.canceled",
  "job.expired",
];

/**
 * Where a webhook goes. Which hosts and schemes a gateway accepts is its URL policy's
 * (gateway/webhooks/url-policy.ts, `422 webhook_url_not_allowed`); this is only the shape,
 * with a message of its own: zod's "Invalid URL" reads as a typo for `ftp://…`.
 */
export const WebhookUrl = z
  .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
  .max(2048);

export const WebhookSubscription = z.strictObject({
  url: WebhookUrl,
  events: z
    .array(WebhookEventType)
    .min(1)
    .max(5)
    .optional()
    .describe(
      `Which changes are sent. Default: ${DEFAULT_WEBHOOK_EVENTS.join(", ")} (how the job ended); name job.running too to hear when each attempt starts.`,
    ),
});
export type WebhookSubscription = z.infer<typeof WebhookSubscription>;
