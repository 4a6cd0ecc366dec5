import { z } from "zod";
import { MAX_TIMEOUT_SECONDS } from "../shared/protocol/job.ts";

/**
 * Plans: what a tenant pays for, as limits the gateway enforces. A tenant is on one plan
 * and may carry overrides of single limits (a negotiated contract, a test), stored with it.
 * Runtime-free: plain data and arithmetic.
 */
export const PLAN_NAMES = ["free", "pro", "enterprise"] as const;
export const PlanName = z.enum(PLAN_NAMES);
export type PlanName = z.infer<typeof PlanName>;

const Priority = z.number().int().min(0).max(9);
/** At most ten years: the cutoffs stay far inside a JavaScript number of milliseconds. */
const RetentionSeconds = z
  .number()
  .int()
  .min(0)
  .max(10 * 366 * 86_400);

/** Snake case: the same object is stored, accepted by the admin API and returned by it. */
const PlanLimitsShape = z.strictObject({
  /** The band a job's `priority` is clamped into (0 lowest, 9 highest). */
  priority_min: Priority,
  priority_max: Priority,
  /** A job's priority when the request names none. */
  priority_default: Priority,
  /** Token bucket: requests per second refilled, and the most that may be spent at once. */
  rate_per_second: z.number().positive().max(1_000_000),
  burst: z.number().int().positive().max(1_000_000),
  /** Jobs still `queued` at once; a submit beyond it is answered 429. */
  max_queued_jobs: z.number().int().positive(),
  /** Largest upload; the gateway's own GANTRY_MAX_UPLOAD_BYTES still caps it. */
  max_upload_bytes: z.number().int().positive(),
  /** Longest `timeout_seconds` a job may ask for; a model's longer default is cut to it. */
  max_timeout_seconds: z.number().int().min(1).max(MAX_TIMEOUT_SECONDS),
  /**
   * Retention (gateway/retention/): how long after a job ended its inputs (uploads' blobs),
   * its output and artifacts, and its row with its events and webhook records are kept;
   * and how long an upload no job used is kept after it was made. The sweeper deletes them.
   */
  input_retention_seconds: RetentionSeconds,
  output_retention_seconds: RetentionSeconds,
  job_retention_seconds: RetentionSeconds,
  upload_retention_seconds: RetentionSeconds,
  /**
   * Device time billed per calendar month (UTC) before new jobs are refused with 429
   * `budget_exhausted` (gateway/usage/budget.ts); null sets no cap.
   */
  monthly_gpu_seconds: z.number().int().positive().max(1_000_000_000).nullable(),
  /**
   * Fair share inside a priority band (gateway/jobs/fair-order.ts): a tenant's portion of a
   * model's agents against the other tenants waiting in the same band, by weight.
   */
  share_weight: z.number().positive().max(10_000),
  /** Jobs `running` at once, across every gateway and agent; the rest wait `queued`. */
  max_running_jobs: z.number().int().positive().max(1_000_000),
});

const bandIsOrdered = (limits: z.infer<typeof PlanLimitsShape>) =>
  limits.priority_min <= limits.priority_default && limits.priority_default <= limits.priority_max;

export const PlanLimits = PlanLimitsShape.refine(bandIsOrdered, {
  message: "priority_min ≤ priority_default ≤ priority_max",
});
export type PlanLimits = z.infer<typeof PlanLimits>;

/** Any subset of the limits, to override a plan for one tenant. */
export const PlanOverrides = PlanLimitsShape.partial();
export type PlanOverrides = z.infer<typeof PlanOverrides>;

const MiB = 1024 * 1024;
const HOUR = 3600;
const DAY = 24 * HOUR;

/**
 * The bands do not overlap between free and pro, so any pro job is taken before any free
 * job waiting for the same model; enterprise reaches above pro.
 */
export const PLANS: Record<PlanName, PlanLimits> = {
  free: {
    priority_min: 0,
    priority_max: 2,
    priority_default: 1,
    rate_per_second: 2,
    burst: 20,
    max_queued_jobs: 100,
    max_upload_bytes: 5 * MiB,
    max_timeout_seconds: 10 * 60,
    input_retention_seconds: HOUR,
    output_retention_seconds: DAY,
    job_retention_seconds: 7 * DAY,
    upload_retention_seconds: DAY,
    share_weight: 1,
    max_running_jobs: 2,
    monthly_gpu_seconds: 10 * HOUR,
  },
  pro: {
    priority_min: 3,
    priority_max: 6,
    priority_default: 5,
    rate_per_second: 20,
    burst: 100,
    max_queued_jobs: 10_000,
    max_upload_bytes: 20 * MiB,
    max_timeout_seconds: HOUR,
    input_retention_seconds: HOUR,
    output_retention_seconds: 7 * DAY,
    job_retention_seconds: 30 * DAY,
    upload_retention_seconds: DAY,
    share_weight: 1,
    max_running_jobs: 32,
    monthly_gpu_seconds: 300 * HOUR,
  },
  enterprise: {
    priority_min: 5,
    priority_max: 9,
    priority_default: 7,
    rate_per_second: 100,
    burst: 500,
    max_queued_jobs: 100_000,
    max_upload_bytes: 100 * MiB,
    max_timeout_seconds: DAY,
    input_retention_seconds: DAY,
    output_retention_seconds: 30 * DAY,
    job_retention_seconds: 90 * DAY,
    upload_retention_seconds: 7 * DAY,
    share_weight: 1,
    max_running_jobs: 512,
    monthly_gpu_seconds: null,
  },
};

/** New tenants made through the admin API or `gantry keys` without a plan. */
export const DEFAULT_PLAN: PlanName = "free";

/**
 * A plan with a tenant's overrides applied. Overrides that would leave the priority band
 * out of order are ignored as a whole (they are validated on the way in, so this only
 * guards against a hand-edited row).
 */
export function effectiveLimits(plan: PlanName, overrides: PlanOverrides | null): PlanLimits {
  const merged = { ...PLANS[plan], ...overrides };
  return PlanLimits.safeParse(merged).success ? merged : PLANS[plan];
}

/**
 * The priority a job gets: the request's, clamped into the plan's band, or the plan's
 * default. Clamping rather than refusing keeps clients portable across plans.
 */
export function jobPriority(limits: PlanLimits, requested: number | undefined): number {
  if (requested === undefined) return limits.priority_default;
  return Math.min(limits.priority_max, Math.max(limits.priority_min, requested));
}
