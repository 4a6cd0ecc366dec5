import { z } from "zod";
import { ModelId } from "./job.ts";
import { TenantId } from "./tenant.ts";

/**
 * Usage: device time per tenant, API key, model and day (`GET /v1/usage`,
 * `GET /v1/admin/usage`), and what a budget has left (`limits.monthly_gpu_seconds`).
 */

/** A day (`2026-12-03`, from its start, UTC) or an instant; `Date.parse` reads both. */
export const Instant = z.union([z.iso.date(), z.iso.datetime({ offset: true })], {
  error: "must be a day (2026-12-01) or an ISO 8601 instant (2026-12-01T08:00:00Z)",
});

export const UsageQuery = z.object({
  from: Instant.optional().describe(
    "First hour counted (rounded down to its hour). Default: the start of this month, UTC.",
  ),
  to: Instant.optional().describe("Hours starting before this are counted. Default: now."),
  group_by: z
    .string()
    .regex(/^(model|key|day)(,(model|key|day))*$/, "must be model, key and/or day, comma-separated")
    .optional()
    .describe("Comma-separated: `model`, `key`, `day`. Default: one row, the period's total."),
});
export type UsageQuery = z.infer<typeof UsageQuery>;

export const AdminUsageQuery = UsageQuery.extend({
  group_by: z
    .string()
    .regex(
      /^(tenant|model|key|day)(,(tenant|model|key|day))*$/,
      "must be tenant, model, key and/or day, comma-separated",
    )
    .optional()
    .describe("Comma-separated: `tenant`, `model`, `key`, `day`. Default: one row, the total."),
  tenant_id: TenantId.optional().describe("One tenant's usage only."),
});
export type AdminUsageQuery = z.infer<typeof AdminUsageQuery>;

export const UsageRow = z.object({
  tenant_id: z.string().optional().describe("With `group_by=tenant` (admin only)."),
  model: ModelId.optional(),
  key_id: z
    .string()
    .nullable()
    .optional()
    .describe("The API key that submitted the jobs; null for jobs from before keys were kept."),
  day: z.iso.date().optional().describe("The UTC day."),
  jobs: z.number().int().describe("Runs billed: jobs that succeeded or failed by their input."),
  gpu_seconds: z.number().describe("Device time billed."),
  wasted_gpu_seconds: z
    .number()
    .describe("Device time of runs the fleet lost (a crash, an eviction, a transient failure)."),
});
export type UsageRow = z.infer<typeof UsageRow>;

export const UsageBudget = z.object({
  monthly_gpu_seconds: z.number().describe("The plan's (or the tenant's own) monthly budget."),
  used_gpu_seconds: z.number().describe("Billed this month so far."),
  remaining_gpu_seconds: z.number(),
  renews_at: z.iso.datetime().describe("The next month's start, UTC."),
});
export type UsageBudget = z.infer<typeof UsageBudget>;

export const UsageReport = z.object({
  data: z.array(UsageRow),
  from: z.iso.datetime(),
  to: z.iso.datetime(),
  budget: UsageBudget.optional().describe(
    "`GET /v1/usage` only, when the tenant has a budget (`limits.monthly_gpu_seconds`).",
  ),
});
export type UsageReport = z.infer<typeof UsageReport>;

/** The body of a `usage.threshold` webhook: a tenant's monthly budget reached 80% or 100%. */
export const UsageThresholdPayload = z.object({
  v: z.literal(1),
  type: z.literal("usage.threshold"),
  timestamp: z.iso.datetime(),
  data: z.object({
    object: z.literal("usage_threshold"),
    /** 80 or 100: the share of the budget now used. */
    threshold: z.number().int(),
    /** The month, `2026-12`, UTC. */
    period: z.string().regex(/^\d{4}-\d{2}$/),
    budget_gpu_seconds: z.number(),
    used_gpu_seconds: z.number(),
    /** When the budget starts again: the next month's start. */
    renews_at: z.iso.datetime(),
  }),
});
export type UsageThresholdPayload = z.infer<typeof UsageThresholdPayload>;
