import { z } from "zod";
import { JobError, ProgressReport } from "../../shared/protocol/index.ts";
import { ModelConfig } from "../pipelines/model-config.ts";

/**
 * Messages between the runner (parent) and its child process over the IPC channel. The
 * channel uses advanced (structured clone) serialisation, so input bytes cross as
 * Uint8Array, not base64. Every message carries `v: 1` so parent and child from different
 * releases refuse each other clearly instead of misreading fields.
 */

const ExecutionProviderSchema = z.enum(["cuda", "cpu"]);

const Bytes = z.custom<Uint8Array>((value) => value instanceof Uint8Array, "expected bytes");

/**
 * Parent → child: load these models on the first provider that works (none: the provider
 * is chosen by a probe, and models load when asked).
 */
export const LoadMessage = z.object({
  v: z.literal(1),
  type: z.literal("load"),
  models: z.array(z.string()),
  threads: z.number().int().min(0),
  providers: z.array(ExecutionProviderSchema).min(1),
  /** Which pipeline and file back each configured model id. */
  configs: z.record(z.string(), ModelConfig).optional(),
  /** Every model the child may be asked to load later (checked at start). */
  serves: z.array(z.string()).optional(),
  /** The CUDA device the sessions open on. */
  deviceId: z.number().int().min(0).optional(),
  /** Models after the first load at start only while their sizes stay within this (MiB). */
  budgetMb: z.number().min(0).optional(),
  /** Every start-up model is kept whatever `budgetMb` (GANTRY_PRELOAD's: never unloaded). */
  keepAll: z.boolean().optional(),
  /** CUDA sessions through TensorRT first, unless a model's config says otherwise. */
  tensorrt: z.boolean().optional(),
});
export type LoadMessage = z.infer<typeof LoadMessage>;

/** Parent → child: load (and warm) one more model, or unload one; answered by `model_reply`. */
export const ModelMessage = z.object({
  v: z.literal(1),
  type: z.enum(["load_model", "unload_model"]),
  id: z.number().int(),
  model: z.string(),
});
export type ModelMessage = z.infer<typeof ModelMessage>;

const RunRequestSchema = z.object({
  jobId: z.string(),
  model: z.string(),
  files: z.record(z.string(), z.object({ bytes: Bytes, contentType: z.string().nullable() })),
  params: z.record(z.string(), z.unknown()),
  attempt: z.number().int().min(1).optional(),
});

/**
 * Parent → child: run jobs of one model, as one batch when there are several. `id` pairs
 * the results with their requests.
 */
export const RunMessage = z.object({
  v: z.literal(1),
  type: z.literal("run"),
  id: z.number().int(),
  requests: z.array(RunRequestSchema).min(1),
});
export type RunMessage = z.infer<typeof RunMessage>;

export const ParentMessage = z.discriminatedUnion("type", [LoadMessage, RunMessage, ModelMessage]);
export type ParentMessage = z.infer<typeof ParentMessage>;

const ProviderAttemptSchema = z.object({
  provider: ExecutionProviderSchema,
  ok: z.boolean(),
  reason: z.string().optional(),
});

/** Child → parent: models loaded and warmed on `provider`. */
export const ReadyMessage = z.object({
  v: z.literal(1),
  type: z.literal("ready"),
  provider: ExecutionProviderSchema,
  attempts: z.array(ProviderAttemptSchema),
  models: z.array(z.string()),
  /** Most jobs each model takes in one batch (1: no batching). */
  maxBatch: z.record(z.string(), z.number().int().min(1)),
  loadMs: z.number(),
  /** What each loaded model takes (MiB): its config's `memory_mb`, else measured. */
  memoryMb: z.record(z.string(), z.number().min(0)).optional(),
});
export type ReadyMessage = z.infer<typeof ReadyMessage>;

/** Child → parent: loading failed; the child exits after sending this. */
export const LoadFailedMessage = z.object({
  v: z.literal(1),
  type: z.literal("load_failed"),
  error: JobError,
});
export type LoadFailedMessage = z.infer<typeof LoadFailedMessage>;

const RunResultSchema = z.discriminatedUnion("ok", [
  z.object({
    ok: z.literal(true),
    output: z.unknown(),
    artifacts: z.record(z.string(), z.object({ contentType: z.string(), bytes: Bytes })).optional(),
  }),
  z.object({ ok: z.literal(false), error: JobError }),
]);

/**
 * Where a run's time went in the child (ms): preparing its inputs (decode, resize,
 * normalise), waiting for the device (the batch ahead of it), on the device, and
 * post-processing. Optional: older children do not say.
 */
export const BatchTimings = z.object({
  prepareMs: z.number(),
  queueMs: z.number(),
  deviceMs: z.number(),
  finishMs: z.number(),
});
export type BatchTimings = z.infer<typeof BatchTimings>;

/** Child → parent: one result per request of a run, in the same order. */
export const ResultMessage = z.object({
  v: z.literal(1),
  type: z.literal("result"),
  id: z.number().int(),
  results: z.array(RunResultSchema),
  durationMs: z.number(),
  timings: BatchTimings.optional(),
});
export type ResultMessage = z.infer<typeof ResultMessage>;

/** Child → parent: the answer to a `load_model` or `unload_model`. */
export const ModelReply = z.object({
  v: z.literal(1),
  type: z.literal("model_reply"),
  id: z.number().int(),
  model: z.string(),
  /** The model's size after a load (MiB); absent after an unload. */
  memoryMb: z.number().min(0).optional(),
  maxBatch: z.number().int().min(1).optional(),
  loadMs: z.number().optional(),
  /** Why the load failed; absent when it worked. */
  error: JobError.optional(),
});
export type ModelReply = z.infer<typeof ModelReply>;

/** Child → parent: a log line for the parent's logger (the child has no log sink). */
export const LogMessage = z.object({
  v: z.literal(1),
  type: z.literal("log"),
  level: z.enum(["info", "warn", "error"]),
  msg: z.string(),
  data: z.record(z.string(), z.unknown()).optional(),
});
export type LogMessage = z.infer<typeof LogMessage>;

/**
 * Child → parent: a running job's latest progress. The child coalesces a job's reports
 * (latest wins) to one message per turn of its event loop; the supervisor paces them to
 * the gateway.
 */
export const ProgressMessage = z.object({
  v: z.literal(1),
  type: z.literal("progress"),
  jobId: z.string(),
  report: ProgressReport,
});
export type ProgressMessage = z.infer<typeof ProgressMessage>;

export const ChildMessage = z.discriminatedUnion("type", [
  ReadyMessage,
  LoadFailedMessage,
  ResultMessage,
  LogMessage,
  ProgressMessage,
  ModelReply,
]);
export type ChildMessage = z.infer<typeof ChildMessage>;
