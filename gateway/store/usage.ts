import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";

/**
 * Usage (migration 0022): what one run used, as a report records it on its job, and the
 * hourly rollup the database keeps from it (`usage_hourly`), read back per tenant, key,
 * model and day. The rollup is written by a trigger in the statement that records the run,
 * so nothing here writes it except the pruning.
 */

/** One run's device time, as its report settles it. */
export interface RunUsage {
  /** Its runner's time on the device, ms (a batch's time split across its items). */
  gpuMs: number;
  /** The run ended the job (succeeded, or failed by its own input): the tenant pays for it. */
  billable: boolean;
  provider?: string | undefined;
  device?: string | undefined;
  /** How long the run waited for its model to load (ms); absent: warm. */
  loadMs?: number | undefined;
}

/**
 * The columns a report's UPDATE sets for its run: a billed run adds to `gpu_ms` and
 * `billed_runs` (one even without a measured time: the job is still counted), a lost one to
 * `wasted_gpu_ms`.
 */
export function runUsageChange(run: RunUsage | undefined) {
  if (!run) return {};
  const ms = Math.max(0, Math.round(run.gpuMs));
  const where = {
    ...(run.provider ? { provider: run.provider } : {}),
    ...(run.device ? { device: run.device } : {}),
    // The latest run's: a warm run after a cold one clears it.
    load_ms: run.loadMs ? Math.round(run.loadMs) : null,
  };
  if (run.billable) {
    return {
      ...where,
      gpu_ms: sql<number>`gpu_ms + ${ms}`,
      billed_runs: sql<number>`billed_runs + 1`,
    };
  }
  return ms > 0 ? { ...where, wasted_gpu_ms: sql<number>`wasted_gpu_ms + ${ms}` } : where;
}

/**
 * A running attempt taken over because its agent is gone (a redelivery's claim, the
 * sweeper's reclaim) never reports its run: its device time is counted, as wasted, from its
 * start to its last sign of life (the claim or the latest heartbeat, both `updated_at`).
 * SET reads the row it replaces, so this rides in the take-over's own UPDATE and its
 * trigger rolls it up; a queued job adds nothing.
 */
export function lostRunChange() {
  return {
    wasted_gpu_ms: sql<number>`wasted_gpu_ms + (CASE WHEN status = 'running'
      AND started_at IS NOT NULL AND updated_at > started_at
      THEN updated_at - started_at ELSE 0 END)`,
  };
}

export const USAGE_GROUPS = ["tenant", "model", "key", "day"] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

export interface UsageQuery {
  /** One tenant's usage; every tenant's when absent (the admin report). */
  tenantId?: string;
  /** Hours starting at or after `from` and before `to` (ms). */
  from: number;
  to: number;
  groupBy: readonly UsageGroup[];
}

/** One row of a report: the groups asked for, and the sums. */
export interface UsageTotals {
  tenant_id?: string;
  model?: string;
  /** null: jobs submitted without a key (before migration 0022). */
  key_id?: string | null;
  /** Start of the UTC day, ms. */
  day?: number;
  jobs: number;
  gpu_ms: number;
  wasted_gpu_ms: number;
}

const DAY_MS = 86_400_000;

/** Sums over the hours of `[from, to)`, one row per group, in group order. */
export async function usageReport(db: Kysely<Database>, query: UsageQuery): Promise<UsageTotals[]> {
  const groups = new Set(query.groupBy);
  const columns = [
    ...(groups.has("tenant") ? [sql<string>`tenant_id`.as("tenant_id")] : []),
    ...(groups.has("model") ? [sql<string>`model`.as("model")] : []),
    ...(groups.has("key") ? [sql<string>`key_id`.as("key_id")] : []),
    ...(groups.has("day") ? [sql<number>`hour - hour % ${sql.lit(DAY_MS)}`.as("day")] : []),
  ];
  let select = db
    .selectFrom("usage_hourly")
    .select([
      sql<number>`CAST(COALESCE(SUM(jobs), 0) AS bigint)`.as("jobs"),
      sql<number>`CAST(COALESCE(SUM(gpu_ms), 0) AS bigint)`.as("gpu_ms"),
      sql<number>`CAST(COALESCE(SUM(wasted_gpu_ms), 0) AS bigint)`.as("wasted_gpu_ms"),
    ])
    .where("hour", ">=", query.from)
    .where("hour", "<", query.to);
  if (query.tenantId !== undefined) select = select.where("tenant_id", "=", query.tenantId);
  if (columns.length > 0) {
    // Grouped and ordered by position: the same expressions as selected, on every dialect.
    const positions = columns.map((_, i) => sql.lit(i + 4));
    select = select
      .select(columns)
      .groupBy(sql`${sql.join(positions)}` as never)
      .orderBy(sql`${sql.join(positions)}` as never);
  }
  const rows = (await select.execute()) as Record<string, unknown>[];
  return rows.map((row) => ({
    ...(groups.has("tenant") ? { tenant_id: String(row.tenant_id) } : {}),
    ...(groups.has("model") ? { model: String(row.model) } : {}),
    ...(groups.has("key") ? { key_id: row.key_id ? String(row.key_id) : null } : {}),
    ...(groups.has("day") ? { day: Number(row.day) } : {}),
    jobs: Number(row.jobs),
    gpu_ms: Number(row.gpu_ms),
    wasted_gpu_ms: Number(row.wasted_gpu_ms),
  }));
}

/** The device time (ms) a tenant was billed for in hours from `from` on: its budget's use. */
export async function billedSince(
  db: Kysely<Database>,
  tenantId: string,
  from: number,
): Promise<number> {
  const row = await db
    .selectFrom("usage_hourly")
    .select(sql<number>`CAST(COALESCE(SUM(gpu_ms), 0) AS bigint)`.as("gpu_ms"))
    .where("tenant_id", "=", tenantId)
    .where("hour", ">=", from)
    .executeTakeFirst();
  return Number(row?.gpu_ms ?? 0);
}

/**
 * Deletes hours before `before`, at most a day of them per call (the oldest), so that one
 * sweep's delete stays bounded on a store that kept years. Returns the rows deleted.
 */
export async function pruneUsage(db: Kysely<Database>, before: number): Promise<number> {
  const oldest = await db
    .selectFrom("usage_hourly")
    .select(sql<number | null>`MIN(hour)`.as("hour"))
    .executeTakeFirst();
  if (oldest?.hour == null || Number(oldest.hour) >= before) return 0;
  const upTo = Math.min(before, Number(oldest.hour) + DAY_MS);
  const result = await db.deleteFrom("usage_hourly").where("hour", "<", upTo).executeTakeFirst();
  return Number(result.numDeletedRows);
}
