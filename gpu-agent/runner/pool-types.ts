import type { RunRequest, RunResult } from "../inference/types.ts";
import type { ModelPlacement, PlacementOptions } from "./placement.ts";
import type { RunnerLogger } from "./types.ts";

/**
 * The runners behind one scheduler. Jobs wait here, after their inputs are downloaded, for
 * a runner; jobs of the same model that wait together run as one batch on runners that
 * batch. A runner with `depth` 2 takes the next batch while one runs, so it prepares that
 * batch (decode, resize) beside the device and goes straight from one to the next. So the
 * supervisor can claim and download ahead (prefetch beyond the slots) and a runner never
 * waits for I/O when work is queued.
 */
export interface RunnerPool {
  readonly size: number;
  /** How many jobs the runners take at once: each runner's largest batch, summed. */
  capacity(models: readonly string[]): number;
  /** The same, over the runners that are idle right now. */
  idleCapacity(models: readonly string[]): number;
  /** Runs one job, alone or in a batch; never rejects unless the runner itself throws. */
  run(request: RunRequest, options?: PoolRunOptions): Promise<RunResult>;
  busyCount(): number;
  /** Jobs downloaded and waiting for a runner. */
  waitingCount(): number;
  snapshot(): RunnerSnapshot[];
  /** Which models each runner holds, loaded on demand within its memory budget. */
  readonly placement?: ModelPlacement;
  /** The GPUs taken out after their runners kept failing. */
  failedGpus?(): number[];
}

export interface PoolOptions extends PlacementOptions {
  /**
   * Hand a free runner the jobs of models it has loaded before older jobs of models it would
   * have to load (default true); a job waits at most `coldAfterMs` (default 2 s) for that.
   */
  preferWarm?: boolean;
  coldAfterMs?: number;
  logger?: RunnerLogger;
}

export interface PoolRunOptions {
  /**
   * Called when the job starts on a runner, with the size of the batch it is in, how long it
   * waited here for one (ms), and how long it then waited for its model to load (0: warm).
   */
  onStart?(start: {
    runner: number;
    pid: number | null;
    batch: number;
    waitedMs: number;
    loadMs: number;
  }): void;
  /** Aborting while the job waits withdraws it: it resolves as `withdrawn` without running. */
  signal?: AbortSignal;
}

export interface RunnerSnapshot {
  index: number;
  pid: number | null;
  provider: string | null;
  restarts: number;
  busy: boolean;
  /** Its GPU (nvidia-smi's index), when it runs on one. */
  gpu?: number;
  /** The models it has loaded now. */
  models: string[];
}
