import type * as ort from "onnxruntime-node";
import type { JobError, ProgressReport } from "../../shared/protocol/index.ts";

// What the pipelines and the runner share: a run's request and result, and the session a
// pipeline drives. It lives apart from both so that pipelines never import the runner.

/** One unit of work for the inference runner (a child process). */
export interface RunRequest {
  jobId: string;
  model: string;
  /** Downloaded input files by input name (`image`, …). */
  files: Record<string, { bytes: Uint8Array; contentType: string | null }>;
  /** The job's other input keys: model parameters. */
  params: Record<string, unknown>;
  /**
   * The queue delivery's attempt (1 on the first): a model may run later attempts at a
   * lower input size. Absent where no queue is involved (tests, benchmarks).
   */
  attempt?: number;
  /**
   * The job's execution limit as its claim gave it; `fromDefault` when the job named none
   * (the gateway stored its task's default, which the model's config may override).
   * Absent: the model's config, else its task's default.
   */
  timeout?: { seconds: number; fromDefault: boolean };
  /**
   * Where a pipeline reports how far the run is (`fraction` 0..1, a short `stage`, an
   * optional `message`). Cheap to call often: reports are coalesced (latest wins) and paced
   * on their way to the gateway. Absent where nobody listens. Pipelines call it through
   * `reportProgress` (pipeline.ts), which clamps what they pass.
   */
  progress?: (report: ProgressReport) => void;
}

/** A binary file a run produced beside its JSON output (a PNG cut-out, a mask, …). */
export interface Artifact {
  contentType: string;
  bytes: Uint8Array;
}

export type RunResult = (
  | { ok: true; output: unknown; artifacts?: Record<string, Artifact> }
  | { ok: false; error: JobError }
) & { usage?: RunUsage };

/**
 * What a run used, stamped by the runner (runner/run-usage.ts) and reported to the gateway,
 * which bills it: its time on the device (absent when unmeasured), where it ran.
 */
export interface RunUsage {
  gpuMs?: number;
  provider?: ExecutionProvider | undefined;
  device?: string;
  /** How long the run waited for its model to load on its runner (ms); absent: warm. */
  loadMs?: number;
}

export type ExecutionProvider = "cuda" | "cpu";

/**
 * What pipelines use of an onnxruntime session. An `ort.InferenceSession` is one; so is a
 * session on the runner's device thread (`device-thread.ts`), which may take over a large
 * feed's buffer (it is detached here after `run`): build fresh inputs for every run.
 */
export interface ModelSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly inputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  readonly outputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  run(feeds: ort.InferenceSession.FeedsType): Promise<ort.InferenceSession.ReturnType>;
  /** Only the outputs named in `fetches`. */
  run(
    feeds: ort.InferenceSession.FeedsType,
    fetches: readonly string[],
  ): Promise<ort.InferenceSession.ReturnType>;
  /**
   * One run of several feeds concatenated along their first (batch) axis, where the session
   * can build the batch more cheaply than its caller (the device thread: in a buffer it
   * reuses). The feeds' other dimensions agree; they stay the caller's, unchanged.
   */
  runStacked?(
    parts: readonly ort.InferenceSession.FeedsType[],
    fetches?: readonly string[],
  ): Promise<ort.InferenceSession.ReturnType>;
  release(): Promise<void>;
}

/** How one model's sessions are opened beyond its provider and device. */
export interface SessionExtras {
  /** Through TensorRT first, on CUDA (models.yaml `tensorrt`, else GANTRY_TENSORRT). */
  tensorrt?: boolean;
}

export type SessionFactory = (modelPath: string, extras?: SessionExtras) => Promise<ModelSession>;
