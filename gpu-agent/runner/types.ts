import type { JobError } from "../../shared/protocol/index.ts";

/** One unit of work for the inference runner (a child process). */
export interface RunRequest {
  jobId: string;
  model: string;
  /** Downloaded input files by input name (`image`, …). */
  files: Record<string, { bytes: Uint8Array; contentType: string | null }>;
  /** The job's other input keys: model parameters. */
  params: Record<string, unknown>;
}

export type RunResult = { ok: true; output: unknown } | { ok: false; error: JobError };

export type ExecutionProvider = "cuda" | "cpu";

/**
 * The Runner port, as the supervisor sees it: a child process that loads models and runs
 * them. If the child dies during `run`, that run resolves with a transient
 * `runner_crashed` error and the runner restarts itself.
 */
export interface Runner {
  /** Spawns the child and loads (and warms) the configured models. */
  start(): Promise<void>;
  run(request: RunRequest): Promise<RunResult>;
  /** The execution provider the child ended up on, once started. */
  readonly provider: ExecutionProvider | null;
  /** The child's pid, for operators and fault tests. */
  readonly pid: number | null;
  readonly restarts: number;
  stop(): Promise<void>;
}

export interface RunnerOptions {
  /** Model ids to load: `ocr`, `noop`. */
  models: readonly string[];
  /** onnxruntime intra-op threads; 0 lets onnxruntime choose. */
  threads: number;
  /** Execution providers to try in order. */
  providers: readonly ExecutionProvider[];
}
