import { z } from "zod";
import { FairnessKey, JobInput, JobMetadata, ModelId, TimeoutSeconds } from "./job.ts";
import { WebhookUrl } from "./webhook-subscription.ts";

export const MAX_BATCH_ITEMS = 1_000;

/** One item of a batch: checked on its own, so one bad item fails only itself. */
export const BatchItem = z.strictObject({
  input: JobInput,
  metadata: JobMetadata.optional(),
  timeout_seconds: TimeoutSeconds.optional().describe("This item's own; else the batch's."),
  fairness_key: FairnessKey.optional(),
});
export type BatchItem = z.infer<typeof BatchItem>;

export const BatchWebhook = z.strictObject({ url: WebhookUrl });
export type BatchWebhook = z.infer<typeof BatchWebhook>;

export const BatchRequest = z.strictObject({
  model: ModelId,
  items: z
    .array(z.unknown())
    .min(1)
    .max(MAX_BATCH_ITEMS)
    .describe(
      "Up to 1 000 `{input, metadata?, timeout_seconds?, fairness_key?}`, each checked on its own.",
    ),
  webhook: BatchWebhook.optional().describe("Gets one signed `batch.completed`."),
  metadata: JobMetadata.optional(),
  priority: z.number().int().min(0).max(9).optional(),
  ttl_seconds: z
    .number()
    .int()
    .min(10)
    .max(7 * 24 * 3600)
    .optional(),
  timeout_seconds: TimeoutSeconds.optional().describe(
    "Every item's execution limit, unless the item names its own.",
  ),
  atomic: z
    .boolean()
    .optional()
    .describe("True: one bad item refuses the whole batch (422) and no job is made."),
});
export type BatchRequest = z.infer<typeof BatchRequest>;

export const BatchStatus = z.enum(["in_progress", "completed", "canceled"]);
export type BatchStatus = z.infer<typeof BatchStatus>;

export const BatchCounts = z.object({
  total: z.number().int(),
  queued: z.number().int(),
  running: z.number().int(),
  succeeded: z.number().int(),
  failed: z.number().int(),
  canceled: z.number().int(),
  expired: z.number().int(),
});
export type BatchCounts = z.infer<typeof BatchCounts>;

/** Why one item was not made into a job. */
export const BatchItemError = z.object({
  index: z.number().int().min(0),
  code: z.string(),
  message: z.string(),
});
export type BatchItemError = z.infer<typeof BatchItemError>;

export const Batch = z.object({
  id: z.string().regex(/^bat_[0-9a-z]{26}$/),
  object: z.literal("batch"),
  model: ModelId,
  status: BatchStatus.describe(
    "`completed` (or `canceled`, after a cancel) once every job is terminal.",
  ),
  request_counts: BatchCounts,
  metadata: JobMetadata.optional(),
  created_at: z.iso.datetime(),
  completed_at: z.iso.datetime().nullable(),
  canceled_at: z.iso.datetime().nullable(),
  errors: z
    .array(BatchItemError)
    .optional()
    .describe("On the answer to `POST /v1/batches` only: the items refused, by index."),
});
export type Batch = z.infer<typeof Batch>;

/** The body of `batch.completed`. Signed per the Standard Webhooks spec, as job webhooks. */
export const BatchWebhookPayload = z.object({
  v: z.literal(1),
  type: z.literal("batch.completed"),
  timestamp: z.iso.datetime(),
  data: Batch,
});
export type BatchWebhookPayload = z.infer<typeof BatchWebhookPayload>;
