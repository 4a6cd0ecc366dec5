import type { JobError } from "../../shared/protocol/index.ts";
import type { SessionFactory } from "../runner/providers.ts";
import type { ExecutionProvider, RunRequest } from "../runner/types.ts";

/** What a pipeline gets when the runner loads it on a chosen execution provider. */
export interface PipelineLoadOptions {
  provider: ExecutionProvider;
  /** onnxruntime intra-op threads; 0 lets onnxruntime choose. */
  threads: number;
  /** Creates onnxruntime sessions on `provider` with the runner's thread settings. */
  createSession: SessionFactory;
}

/** A loaded model: sessions created, ready to run requests. */
export interface LoadedPipeline {
  /** Returns the job output, or throws a `PipelineFailure` for an expected failure. */
  run(request: RunRequest): Promise<unknown>;
  /** Runs once on synthetic input so the first real job does not pay for lazy allocation. */
  warm(): Promise<void>;
  release(): Promise<void>;
}

export interface PipelineDefinition {
  /** The model id jobs name (`ocr`, `noop`). */
  id: string;
  load(options: PipelineLoadOptions): Promise<LoadedPipeline>;
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
