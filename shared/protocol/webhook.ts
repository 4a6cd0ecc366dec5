import { z } from "zod";
import { Job } from "./job.ts";
import { WebhookEventType } from "./webhook-subscription.ts";

/** The body of every webhook. Signed per the Standard Webhooks spec. */
export const WebhookPayload = z.object({
  v: z.literal(1),
  type: WebhookEventType,
  timestamp: z.iso.datetime(),
  data: Job,
});
export type WebhookPayload = z.infer<typeof WebhookPayload>;

export const WebhookSecret = z.object({
  object: z.literal("webhook_secret"),
  secret: z.string().startsWith("whsec_"),
});
export type WebhookSecret = z.infer<typeof WebhookSecret>;
