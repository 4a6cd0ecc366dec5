import type { Logger } from "pino";
import type { ExecutionProvider, RunRequest, RunResult } from "../inference/types.ts";
import type { ModelConfig } from "../pipelines/model-config.ts";
import type { BatchTimings } from "./child-protocol.ts";

/** What a runner logs of a model its memory budget cannot hold, at start or on demand. */
export const OVERSIZED_MODEL =
  "model is larger than the runner's whole memory budget: it is loaded alone";
/** What a runner logs when models it may not unload leave a loaded one over its budget. */
export const NO_ROOM =
  "no room in the runner's memory budget: the models it holds are pinned (GANTRY_PRELOAD) or running; loaded over it";
/** What a runner logs of a GANTRY_PRELOAD model past its memory budget. */
export const PRELOAD_OVER_BUDGET =
  "GANTRY_PRELOAD's models exceed the runner's memory budget: this one is loaded all the same";

/** How one model is batched on one runner, as the scheduler in front of the runners sees it. */
export interface BatchPolicy {
  /** Most requests of the model in one batch; 1 when the model cannot batch. */
  maxBatch: number;
  /** How long the first request of a batch may wait for company when a runner is free. */
  windowMs: number;
}

/**
 * The Runner port, as the supervisor sees it: a child process that loads models and runs
 * them. If the child dies during `run`, that run resolves with a transient
 * `runner_crashed` error and the runner restarts itself.
 */
export interface Runner {
  /** Spawns the child and loads (and warms) the configured models. */
  start(): Promise<void>;
  run(request: RunRequest): Promise<RunResult>;
  /**
   * Runs requests of one model as one batch, one result per request in order. Runners that
   * cannot batch leave it out and get one request at a time.
   */
  runBatch?(requests: readonly RunRequest[]): Promise<RunResult[]>;
  /** The batch policy for `model` now (it shrinks after an out-of-memory error). */
  batching?(model: string): BatchPolicy;
  /**
   * How many runs it takes at once: the one on the device and the next, prepared beside it
   * so the device goes straight from one to the next. 1 when absent.
   */
  readonly depth?: number;
  /** The execution provider the child ended up on, once started. */
  readonly provider: ExecutionProvider | null;
  /** The child's pid, for operators and fault tests. */
  readonly pid: number | null;
  readonly restarts: number;
  stop(): Promise<void>;
  /**
   * Loads `model` now (and warms it); resolves with what it takes (MiB) once it can run, and
   * rejects when it cannot be loaded. Runners without it load every model at start.
   */
  loadModel?(model: string): Promise<ModelLoad>;
  /** Releases an idle model's sessions, freeing its memory for another. */
  unloadModel?(model: string): Promise<void>;
  /** The models loaded now, with what each takes (MiB); all of them for runners without it. */
  loadedModels?(): ReadonlyMap<string, number>;
  /** The GPU its sessions run on (nvidia-smi's index); absent on a host without GPUs. */
  readonly gpu?: number;
}

/** A model a runner loaded on demand. */
export interface ModelLoad {
  /** What it takes on the runner's device (MiB): models.yaml's `memory_mb`, else measured. */
  memoryMb: number;
}

export interface RunnerOptions {
  /** Model ids to load: `ocr`, `noop`, or ids that `modelConfigs` defines. */
  models: readonly string[];
  /** onnxruntime intra-op threads; 0 lets onnxruntime choose. */
  threads: number;
  /** Execution providers to try in order. */
  providers: readonly ExecutionProvider[];
  /**
   * Which pipeline and ONNX file back each model id, with its batch limits and options. The
   * built-in ids (`ocr`, `noop`) need no entry.
   */
  modelConfigs?: Readonly<Record<string, ModelConfig>>;
  /** The batch window of models whose config names none. Default 10 ms. */
  batchWindowMs?: number;
  /** Models loaded at start, in order, while they fit `memoryBudgetMb`. Default: `models`. */
  preload?: readonly string[];
  /** `preload` is GANTRY_PRELOAD's: every one of them is loaded, whatever the budget. */
  pinPreload?: boolean;
  /** The memory (MiB) this runner's models may take; unlimited when absent. */
  memoryBudgetMb?: number;
  /** The GPU to run on: nvidia-smi's index (for reports) and CUDA's device id. */
  gpu?: { index: number; cudaDeviceId: number };
  /** CUDA sessions through TensorRT first (GANTRY_TENSORRT; a model's config overrides it). */
  tensorrt?: boolean;
}

export type RunnerLogger = Pick<Logger, "info" | "warn" | "error">;

export interface ChildRunnerOptions extends RunnerOptions {
  logger?: RunnerLogger;
  /** First delay before forking a new child after a crash; doubles per recent crash. */
  restartDelayMs?: number;
  /** Longest delay between restarts, however often the child crashes. */
  maxRestartDelayMs?: number;
  /**
   * After this many children in a row fail to restart, the runner gives up (every run then
   * fails). Default: never for a transient failure; a permanent one gives up at once.
   */
  maxFailedStarts?: number;
  /** How long `stop` waits after SIGTERM before SIGKILL. */
  stopTimeoutMs?: number;
  /** Told where each batch's time went (metrics, benchmarks); must be cheap. */
  onBatch?(stats: RunnerBatchStats): void;
}

/** One batch through a runner child, in milliseconds. */
export interface RunnerBatchStats {
  model: string;
  size: number;
  /** From the send to the child until its results were read back. */
  roundTripMs: number;
  /** The child's own time on it: the rest of the round trip is the IPC both ways. */
  childMs: number;
  /** The child's stages, when it said. */
  timings?: BatchTimings;
}
