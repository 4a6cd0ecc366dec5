import { PLAN_NAMES, type PlanLimits } from "../../plans.ts";

/**
 * The instants before which each kind of data is due, from a tenant's (or a plan's)
 * limits. A job row goes only after its inputs and outputs: its cutoff is the latest of
 * the three, so an override can never make a row outlive nothing or orphan a blob.
 */
export interface RetentionCutoffs {
  /** Jobs that ended before it lose the uploads their input named. */
  inputs: number;
  /** ... their output and artifacts. */
  outputs: number;
  /** ... their row, events and webhook deliveries and attempts. */
  rows: number;
  /** Uploads never named by a job, made before it, are deleted. */
  uploads: number;
}

export function cutoffsFor(limits: PlanLimits, now: number): RetentionCutoffs {
  const s = (seconds: number) => now - seconds * 1000;
  return {
    inputs: s(limits.input_retention_seconds),
    outputs: s(limits.output_retention_seconds),
    rows: s(
      Math.max(
        limits.job_retention_seconds,
        limits.output_retention_seconds,
        limits.input_retention_seconds,
      ),
    ),
    uploads: s(limits.upload_retention_seconds),
  };
}

/** Everything, whatever its age: a tenant purge. */
export const purgeAll = (now: number): RetentionCutoffs => ({
  inputs: now + 1,
  outputs: now + 1,
  rows: now + 1,
  uploads: now + 1,
});

export { PLAN_NAMES };
