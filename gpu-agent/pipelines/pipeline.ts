import type { z } from "zod";
import {
  type JobError,
  PROGRESS_MESSAGE_MAX,
  PROGRESS_STAGE_MAX,
  type ProgressReport,
} from "../../shared/protocol/index.ts";
import type {
  Artifact,
  ExecutionProvider,
  RunRequest,
  SessionFactory,
} from "../inference/types.ts";
import type { ModelConfig } from "./model-config.ts";

/** What a pipeline gets when the runner loads it on a chosen execution provider. */
export interface PipelineLoadOptions {
  provider: ExecutionProvider;
  /** onnxruntime intra-op threads; 0 lets onnxruntime choose. */
  threads: number;
  /** Creates onnxruntime sessions on `provider` with the runner's thread settings. */
  createSession: SessionFactory;
  /** The model id jobs name; defaults to the pipeline's id. */
  modelId?: string;
  /** The model's file, batch limits and pipeline options; built-ins load without one. */
  config?: ModelConfig;
}

/** A loaded model: sessions created, ready to run requests. */
export interface LoadedPipeline {
  /**
   * Returns the job output (or an `OutputWithArtifacts` when the run made files), or throws
   * a `PipelineFailure` for an expected failure.
   */
  run(request: RunRequest): Promise<unknown>;
  /**
   * Most requests `runBatch` takes at once: above 1 only for a model whose batch axis is
   * dynamic. Absent means 1.
   */
  readonly maxBatch?: number;
  /**
   * Runs requests of this model as one batch. Each entry settles on its own: a request whose
   * input is bad fails alone while the others succeed.
   */
  runBatch?(requests: readonly RunRequest[]): Promise<PromiseSettledResult<unknown>[]>;
  /**
   * The run cut in two so the runner can overlap jobs: this part is the per-job CPU work
   * (decode, resize, normalise) and may run while another batch is on the device; the `run`
   * it returns does the device work and what follows it, one batch at a time. Pipelines
   * without it run whole, one batch at a time.
   */
  prepareBatch?(requests: readonly RunRequest[]): Promise<PreparedBatch>;
  /** Runs once on synthetic input so the first real job does not pay for lazy allocation. */
  warm(): Promise<void>;
  release(): Promise<void>;
}

/** Requests whose inputs are ready for the device; `run` settles each request on its own. */
export interface PreparedBatch {
  run(): Promise<PromiseSettledResult<unknown>[]>;
  /** Set by `run`: how much of it was the model itself (ms); the rest is post-processing. */
  deviceMs?: number;
}

export interface PipelineDefinition {
  /** The pipeline's id: a model config's `pipeline`, and the model id of built-ins. */
  id: string;
  /** True when the pipeline runs without a model config (`ocr`, `noop`). */
  builtin?: boolean;
  load(options: PipelineLoadOptions): Promise<LoadedPipeline>;
}

/**
 * A job output with binary files beside it. The agent uploads each artifact where the claim
 * says and merges a reference `{ content_type, size_bytes }` into the output under its name,
 * so `output` must be a JSON object.
 */
export class OutputWithArtifacts {
  constructor(
    readonly output: Record<string, unknown>,
    readonly artifacts: Readonly<Record<string, Artifact>>,
  ) {}
}

/**
 * An expected failure with the error class that decides what happens to the job: bad input
 * is permanent (dead-lettered at once), anything else transient (retried).
 */
export class PipelineFailure extends Error {
  constructor(readonly jobError: JobError) {
    super(jobError.message);
    this.name = "PipelineFailure";
  }
}

export function permanentFailure(code: string, message: string): PipelineFailure {
  return new PipelineFailure({ type: "permanent", code, message });
}

export function transientFailure(code: string, message: string): PipelineFailure {
  return new PipelineFailure({ type: "transient", code, message });
}

/** The one image a vision model reads: `image`, or the only input whatever its name. */
export function imageInput(request: RunRequest, modelId: string): Uint8Array {
  const named = request.files.image;
  if (named) return named.bytes;
  const all = Object.values(request.files);
  if (all.length === 1) return all[0]!.bytes;
  throw permanentFailure(
    "missing_input",
    all.length === 0
      ? `the ${modelId} model needs an image input named \`image\``
      : `the ${modelId} model reads one image; name it \`image\``,
  );
}

/**
 * A job's parameters, parsed with its task's schema from the task catalog (the one the
 * gateway validated the job with); a mismatch fails the job permanently, naming the key.
 */
export function taskParams<T extends z.ZodType>(schema: T, request: RunRequest): z.infer<T> {
  const parsed = schema.safeParse(request.params);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const where = issue?.path.join(".") || "params";
  throw permanentFailure("invalid_params", `${where}: ${issue?.message ?? "invalid"}`);
}

/** Reports progress for `request` if anyone listens; a bad report is clamped, never thrown. */
export function reportProgress(request: RunRequest, report: ProgressReport): void {
  if (!request.progress) return;
  const fraction = Number.isFinite(report.fraction) ? Math.min(1, Math.max(0, report.fraction)) : 0;
  request.progress({
    fraction,
    stage: report.stage.slice(0, PROGRESS_STAGE_MAX) || "running",
    ...(report.message === undefined
      ? {}
      : { message: report.message.slice(0, PROGRESS_MESSAGE_MAX) }),
  });
}
