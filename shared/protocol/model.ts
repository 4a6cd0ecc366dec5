import { z } from "zod";
import { JobId } from "./job.ts";

/**
 * The models a gateway serves, as `GET /v1/models` and `GET /v1/models/{id}` show them, and
 * the answers of the operator's switches (`/v1/admin/models/{id}/pause|resume|purge`).
 */

/** A JSON Schema as the document writes it: only the parts clients read are named. */
export const JsonSchemaObject = z
  .looseObject({
    properties: z
      .record(
        z.string(),
        z.looseObject({
          type: z.string().optional(),
          description: z.string().optional(),
          enum: z.array(z.unknown()).optional(),
        }),
      )
      .optional(),
    required: z.array(z.string()).optional(),
  })
  .describe("A JSON Schema (draft 2020-12)");
export type JsonSchemaObject = z.infer<typeof JsonSchemaObject>;

export const ModelLimits = z
  .object({
    max_upload_bytes: z.number().int(),
    /** Null for a model that does not decode images. */
    max_image_pixels: z.number().int().nullable(),
    max_image_side: z.number().int().nullable(),
    max_queue_depth: z.number().int(),
    priority: z.object({ min: z.number().int(), max: z.number().int() }),
    timeout_seconds: z.object({ default: z.number().int(), max: z.number().int() }),
  })
  .describe("The limits that apply to the caller's tenant for this model");
export type ModelLimits = z.infer<typeof ModelLimits>;

/** A model's live state, as the one-model view and the operator's switches show it. */
export const ModelState = z.object({
  paused: z.boolean(),
  reject_new: z.boolean(),
  paused_at: z.iso.datetime().nullable(),
  reason: z.string().nullable(),
  queued: z.number().int(),
  running: z.number().int(),
  /** Live agents that registered the model. */
  agents: z.number().int(),
  /** Jobs started per minute over the last minutes; null without a recent pace. */
  starts_per_minute: z.number().nullable(),
  wait_p50_ms: z.number().nullable(),
  wait_p95_ms: z.number().nullable(),
});
export type ModelState = z.infer<typeof ModelState>;

export const Model = z.object({
  id: z.string(),
  object: z.literal("model"),
  task: z.string(),
  description: z.string(),
  input_schema: JsonSchemaObject,
  /** What a succeeded job's `output` holds. */
  output_schema: JsonSchemaObject,
  content_types: z.array(z.string()),
  limits: ModelLimits,
  /** Only on `GET /v1/models/{id}`: it costs a few reads. */
  state: ModelState.optional(),
});
export type Model = z.infer<typeof Model>;

export const ModelList = z.object({ object: z.literal("list"), data: z.array(Model) });
export type ModelList = z.infer<typeof ModelList>;

/** Pause and resume answer the model's state; resume adds how many jobs it published again. */
export const ModelSwitched = ModelState.extend({
  id: z.string(),
  object: z.literal("model_state"),
  republished: z.number().int().optional(),
});
export type ModelSwitched = z.infer<typeof ModelSwitched>;

export const ModelPurged = z.object({
  object: z.literal("purge"),
  id: z.string(),
  canceled: z.number().int(),
  /** Pass it as `cursor` for the next call; null when nothing queued is left. */
  next_cursor: JobId.nullable(),
});
export type ModelPurged = z.infer<typeof ModelPurged>;
