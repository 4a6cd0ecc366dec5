import type { JobError } from "../../shared/protocol/index.ts";

/** The code a job gets when it keeps killing runners: dead-lettered at once. */
export const POISON_JOB_CODE = "poison_job";

export interface PoisonTrackerOptions {
  /** Runner crashes on one job before it is poison. Default 3. */
  crashes?: number;
  /** Jobs remembered at once; the oldest is forgotten first. Default 10,000. */
  capacity?: number;
}

/**
 * Counts runner crashes per job id across its deliveries to this agent. A job that crashes
 * the runner every time (an input that trips a native bug, a model that segfaults on it)
 * would otherwise take a runner down on each of its attempts and hold a GPU slot restarting;
 * after `crashes` of them it fails permanently as `poison_job`.
 */
export class PoisonTracker {
  private readonly counts = new Map<string, number>();
  private readonly limit: number;
  private readonly capacity: number;

  constructor(options: PoisonTrackerOptions = {}) {
    this.limit = options.crashes ?? 3;
    this.capacity = options.capacity ?? 10_000;
  }

  /** The job ended some other way than crashing a runner: its count starts over. */
  forget(jobId: string): void {
    this.counts.delete(jobId);
  }

  /**
   * Looks at an attempt's error: a runner crash is counted, and the error becomes `poison_job`
   * once the job has crashed the runner `crashes` times. Anything else passes unchanged.
   */
  judge(jobId: string, error: JobError): JobError {
    if (error.code !== "runner_crashed") {
      this.counts.delete(jobId);
      return error;
    }
    const crashes = (this.counts.get(jobId) ?? 0) + 1;
    this.counts.delete(jobId); // re-insert: Map order is the eviction order
    this.counts.set(jobId, crashes);
    if (this.counts.size > this.capacity) {
      this.counts.delete(this.counts.keys().next().value as string);
    }
    if (crashes < this.limit) return error;
    this.counts.delete(jobId);
    return {
      type: "permanent",
      code: POISON_JOB_CODE,
      message: `the job crashed the runner ${crashes} times (last: ${error.message})`.slice(
        0,
        2000,
      ),
    };
  }
}
