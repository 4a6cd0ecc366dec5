import type { RunResult } from "../inference/types.ts";
import type { Runner, RunnerLogger } from "./types.ts";

/** A run result that says the runner itself failed (its child died or cannot start). */
const RUNNER_FAULTS = new Set(["runner_crashed", "runner_unavailable"]);

export interface DeviceHealthOptions {
  /** Runner faults on one GPU, within `windowMs`, that take it out. Default 3. */
  maxFaults?: number;
  windowMs?: number;
  logger?: RunnerLogger;
  now?: () => number;
}

/**
 * Takes a failing GPU out alone. A CUDA error that kills a GPU's runners again and again (a
 * fallen-off-the-bus card, an ECC fault, a wedged context) would otherwise crash every job
 * sent there while the other GPUs idle: after `maxFaults` runner faults on one GPU within
 * `windowMs`, its runners get no more work and are stopped; the jobs of the batch that
 * crashed go back in line for the others. Runners without a GPU are never taken out.
 */
export class DeviceHealth {
  private readonly faults = new Map<number, number[]>();
  private readonly out = new Set<number>();
  private readonly maxFaults: number;
  private readonly windowMs: number;
  private readonly now: () => number;

  constructor(
    private readonly runners: readonly Runner[],
    private readonly options: DeviceHealthOptions = {},
  ) {
    this.maxFaults = options.maxFaults ?? 3;
    this.windowMs = options.windowMs ?? 60_000;
    this.now = options.now ?? (() => performance.now());
  }

  /** Whether runner `index` may take work (its GPU is not out). */
  usable(index: number): boolean {
    const gpu = this.runners[index]?.gpu;
    return gpu === undefined || !this.out.has(gpu);
  }

  /** The GPUs taken out so far. */
  get failedGpus(): number[] {
    return [...this.out];
  }

  /**
   * Notes what a batch on runner `index` came back with; true when its GPU is out now (this
   * batch's jobs then belong to the other GPUs, not to a failure of theirs).
   */
  observe(index: number, results: readonly RunResult[]): boolean {
    const gpu = this.runners[index]?.gpu;
    if (gpu === undefined) return false;
    if (this.out.has(gpu)) return true;
    if (!results.some((r) => !r.ok && RUNNER_FAULTS.has(r.error.code))) return false;
    const at = this.now();
    const recent = (this.faults.get(gpu) ?? []).filter((t) => at - t <= this.windowMs);
    recent.push(at);
    this.faults.set(gpu, recent);
    if (recent.length < this.maxFaults) return false;
    this.takeOut(gpu, recent.length);
    return true;
  }

  private takeOut(gpu: number, faults: number): void {
    this.out.add(gpu);
    const runners = this.runners.filter((runner) => runner.gpu === gpu);
    const left = this.runners.filter(
      (runner) => runner.gpu !== undefined && !this.out.has(runner.gpu!),
    );
    this.options.logger?.error(
      {
        gpu,
        faults,
        window_ms: this.windowMs,
        runners: runners.length,
        gpus_left: new Set(left.map((r) => r.gpu)).size,
      },
      `GPU ${gpu} taken out after ${faults} runner faults: its jobs go to the other GPUs`,
    );
    for (const runner of runners) void runner.stop().catch(() => {});
  }
}
