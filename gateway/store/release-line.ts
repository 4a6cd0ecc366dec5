import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { isPostgresDb } from "./job-metadata.ts";

/**
 * A model's line as a release pass reads it (release-snapshot.ts): its window of released
 * and running jobs, and its lanes of held jobs.
 */

type Db = Kysely<Database>;

export const ACTIVE = sql`(status = 'running' OR (status = 'queued' AND released_at IS NOT NULL))`;

/**
 * `jobs`, read through `jobs_active` (the index of running and released jobs) on SQLite and
 * D1. Without statistics SQLite's planner takes the index that serves the equality, on the
 * model or on the tenant, and reads every job that model or tenant ever had: 0.55 ms a count
 * at 6 000 jobs against 0.012 ms through `jobs_active`, and on the embedded stack under a
 * flood the release passes took half of the gateway's time. Postgres picks the partial index
 * by itself. (If SQLite could not use the index, the statement would fail: never silently slow.)
 */
export const activeJobs = (db: Db) =>
  isPostgresDb(db) ? sql`jobs` : sql`jobs INDEXED BY jobs_active`;

/**
 * A model's window, its released (`n`) and running (`m`) jobs: the last terms of a SELECT and
 * where they are counted (the line a pass reads, and the release at insert).
 */
export const windowCounts = (db: Db, model: string) => sql`
  sum(CASE WHEN status = 'queued' THEN 1 ELSE 0 END) AS n,
  sum(CASE WHEN status = 'running' THEN 1 ELSE 0 END) AS m
  FROM ${activeJobs(db)} WHERE model = ${model} AND ${ACTIVE}`;

/**
 * Jobs a model's window has room for: the window, or as many as run now when that is more
 * (agents that take many jobs at once get as many), less those released and not yet taken.
 * A job that ends never adds room (it only lowers the running count); a claim does
 * (gateway/jobs/release.ts counts on it). Every pass and the release at insert weigh it so.
 */
export function windowRoom(line: { released: number; running: number }, window: number): number {
  return Math.max(window, line.running) - line.released;
}

/**
 * Of the active jobs, those that hold a place under their tenant's `max_running_jobs`: every
 * running job, and the released ones of models that are not paused. A released job of a
 * paused model cannot start until the resume, which holds it back again
 * (model-switches.ts `holdModel`) to go out within the bound; counted meanwhile, a tenant's
 * jobs waiting on a paused model kept its other models' jobs from starting.
 */
export const HOLDS_PLACE = sql`(status = 'running'
  OR model NOT IN (SELECT model FROM model_switches WHERE paused_at IS NOT NULL))`;

/** A tenant's jobs that hold a place, every model, as a scalar subquery: what `max_running_jobs` bounds. */
export const tenantActive = (db: Db, tenantId: string) =>
  sql<number>`(SELECT count(*) FROM ${activeJobs(db)}
    WHERE tenant_id = ${tenantId} AND ${ACTIVE} AND ${HOLDS_PLACE})`;

/** A job held in the store, not yet released to the queue. */
export const HELD = sql<boolean>`status = 'queued' AND released_at IS NULL`;

export type LaneRow = {
  priority: number;
  tenant_id: string;
  fairness_key: string | null;
  held: number | string;
  oldest: string;
};

/** The held jobs of one lane (a band, a tenant and a `fairness_key`) of `model`. */
export function heldInLane(
  model: string,
  lane: { priority: number; tenantId: string; fairnessKey: string | null },
) {
  const key =
    lane.fairnessKey === null ? sql`fairness_key IS NULL` : sql`fairness_key = ${lane.fairnessKey}`;
  return sql`model = ${model} AND ${HELD}
    AND priority = ${lane.priority} AND tenant_id = ${lane.tenantId} AND ${key}`;
}
const LANE_ORDER = {
  asc: sql`priority ASC, tenant_id ASC, fairness_key ASC, id ASC`,
  desc: sql`priority DESC, tenant_id DESC, fairness_key DESC, id DESC`,
};

type LineRow = {
  kind: "window" | "first" | "last" | "held";
  priority: number | null;
  tenant_id: string | null;
  fairness_key: string | null;
  id: string | null;
  n: number | string | null;
  m: number | string | null;
};

/**
 * The model's line in one statement: its window (released and running jobs), the first and
 * last of its held jobs in lane order (probes of `jobs_held`) and its held jobs counted up
 * to `cap` (in lane order too: `jobs_held` then serves it, where a scan of the table that stops
 * at the first `cap` held jobs would read the finished jobs before them). A pass reads it on every claim, end and submit, so its parts are one round trip
 * and not four: each statement is a write to the database's socket and a wake-up of its
 * backend, which on a busy box cost more than the reads themselves.
 */
export async function lineOf(db: Db, model: string, cap: number) {
  // Written into the text, not bound: a release pass reads with one of two caps (1, then twice
  // its window), and with the cap a parameter Postgres could not settle on one plan for the
  // statement, whose cost turns on it, and planned it anew on most calls (bench/backlog.ts:
  // 3 752 plans for 4 725 reads, 3.1 s of its CPU; 269 plans this way).
  const heldCap = sql.lit(Math.max(1, Math.floor(cap)));
  const edge = (direction: "asc" | "desc", kind: "first" | "last") => sql`
    SELECT ${sql.lit(kind)} AS kind, priority, tenant_id, fairness_key, id, NULL AS n, NULL AS m
    FROM (SELECT priority, tenant_id, fairness_key, id FROM jobs
          WHERE model = ${model} AND ${HELD} ORDER BY ${LANE_ORDER[direction]} LIMIT 1) ${sql.raw(`edge_${kind}`)}`;
  const { rows } = await sql<LineRow>`
    SELECT 'window' AS kind, NULL AS priority, NULL AS tenant_id, NULL AS fairness_key, NULL AS id,
           ${windowCounts(db, model)}
    UNION ALL ${edge("asc", "first")}
    UNION ALL ${edge("desc", "last")}
    UNION ALL
    SELECT 'held', NULL, NULL, NULL, NULL, count(*), NULL FROM (
      SELECT 1 FROM jobs WHERE model = ${model} AND ${HELD}
      ORDER BY ${LANE_ORDER.asc} LIMIT ${heldCap}) capped`.execute(db);
  const of = (kind: LineRow["kind"]) => rows.find((row) => row.kind === kind);
  const window = of("window");
  return {
    released: Number(window?.n ?? 0),
    running: Number(window?.m ?? 0),
    first: of("first"),
    last: of("last"),
    held: Number(of("held")?.n ?? 0),
  };
}

export type Line = Awaited<ReturnType<typeof lineOf>>;

/**
 * The model's lanes of held jobs. A backlog of one lane (one tenant alone, the common case
 * of a long one) is known from the line's two edges, its first and last job in lane order,
 * and its count up to the cap; several lanes are grouped over every held job.
 */
export async function heldLanes(db: Db, model: string, line: Line): Promise<LaneRow[]> {
  const { first, last } = line;
  if (!first?.id || !last || first.priority === null || first.tenant_id === null) return [];
  const oneLane =
    first.priority === last.priority &&
    first.tenant_id === last.tenant_id &&
    first.fairness_key === last.fairness_key;
  if (oneLane) {
    return [
      {
        priority: Number(first.priority),
        tenant_id: first.tenant_id,
        fairness_key: first.fairness_key,
        held: line.held,
        oldest: first.id,
      },
    ];
  }
  return db
    .selectFrom("jobs")
    .where("model", "=", model)
    .where(HELD)
    .select((eb) => [
      "priority",
      "tenant_id",
      "fairness_key",
      eb.fn.countAll<number | string>().as("held"),
      eb.fn.min("id").as("oldest"),
    ])
    .groupBy(["priority", "tenant_id", "fairness_key"])
    .execute();
}
