import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { isPostgresDb } from "./job-metadata.ts";

/**
 * What a model's line looks like now, read for a release pass (job-release.ts): its window,
 * its lanes of held jobs, and the counts and recent starts the fair order
 * (gateway/jobs/fair-order.ts) weighs them by.
 */

type Db = Kysely<Database>;

/** A tenant's held jobs of one band and one `fairness_key`, oldest first. */
export interface HeldLane {
  priority: number;
  tenantId: string;
  fairnessKey: string | null;
  /** Its held jobs, counted up to what the pass could release (more is never needed). */
  held: number;
  oldestId: string;
}

/** Running or released jobs: on the model per tenant and key, and per tenant on any model. */
export interface ActiveCount {
  tenantId: string;
  fairnessKey: string | null;
  count: number;
}

export interface ReleaseSnapshot {
  model: string;
  /** Released jobs of the model not yet taken by an agent. */
  released: number;
  /** The model's running jobs. */
  running: number;
  lanes: HeldLane[];
  /** On this model, per tenant and key (only tenants with held jobs). */
  active: ActiveCount[];
  /** Per tenant across every model: what `max_running_jobs` bounds. */
  tenantActive: Map<string, number>;
  /** The plan and overrides of each tenant with held jobs. */
  tenants: Map<string, { plan: string; limits: string | null }>;
  /** When each tenant and key last had a job of the model start, in the last minute. */
  lastStarted: { tenantId: string; fairnessKey: string | null; at: number }[];
}

/** Release up to `count` of a lane's oldest jobs, if the tenant stays within `maxActive`. */
export interface ReleasePick {
  priority: number;
  tenantId: string;
  fairnessKey: string | null;
  count: number;
  maxActive: number;
}

/** Picks what to release from a snapshot of a model's line (gateway/jobs/fair-order.ts). */
export type Chooser = (snapshot: ReleaseSnapshot) => ReleasePick[];

const MAX_TENANTS = 90;

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

/** A model's released jobs not yet taken, and its running jobs. */
export async function windowCounts(db: Db, model: string) {
  const { rows } = await sql<{ released: number | string | null; running: number | string | null }>`
    SELECT sum(CASE WHEN status = 'queued' THEN 1 ELSE 0 END) AS released,
           sum(CASE WHEN status = 'running' THEN 1 ELSE 0 END) AS running
    FROM ${activeJobs(db)} WHERE model = ${model} AND ${ACTIVE}`.execute(db);
  return { released: Number(rows[0]?.released ?? 0), running: Number(rows[0]?.running ?? 0) };
}

/** How far back a lane's last start counts for breaking ties (fair-order.ts)… */
const RECENT_MS = 60_000;
/** …and among how many of the model's latest starts (`lastStarts`). */
export const RECENT_STARTS = 256;

type LaneRow = {
  priority: number;
  tenant_id: string;
  fairness_key: string | null;
  held: number | string;
  oldest: string;
};

const held = (db: Db, model: string) =>
  db
    .selectFrom("jobs")
    .where("model", "=", model)
    .where("status", "=", "queued")
    .where("released_at", "is", null);

/** The held jobs of one lane (a band, a tenant and a `fairness_key`) of `model`. */
export function heldInLane(
  model: string,
  lane: { priority: number; tenantId: string; fairnessKey: string | null },
) {
  const key =
    lane.fairnessKey === null ? sql`fairness_key IS NULL` : sql`fairness_key = ${lane.fairnessKey}`;
  return sql`model = ${model} AND status = 'queued' AND released_at IS NULL
    AND priority = ${lane.priority} AND tenant_id = ${lane.tenantId} AND ${key}`;
}

const HELD = sql`status = 'queued' AND released_at IS NULL`;
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
 * to `cap`. A pass reads it on every claim, end and submit, so its parts are one round trip
 * and not four: each statement is a write to the database's socket and a wake-up of its
 * backend, which on a busy box cost more than the reads themselves.
 */
async function lineOf(db: Db, model: string, cap: number) {
  const edge = (direction: "asc" | "desc", kind: "first" | "last") => sql`
    SELECT ${sql.lit(kind)} AS kind, priority, tenant_id, fairness_key, id, NULL AS n, NULL AS m
    FROM (SELECT priority, tenant_id, fairness_key, id FROM jobs
          WHERE model = ${model} AND ${HELD} ORDER BY ${LANE_ORDER[direction]} LIMIT 1) ${sql.raw(`edge_${kind}`)}`;
  const { rows } = await sql<LineRow>`
    SELECT 'window' AS kind, NULL AS priority, NULL AS tenant_id, NULL AS fairness_key, NULL AS id,
           sum(CASE WHEN status = 'queued' THEN 1 ELSE 0 END) AS n,
           sum(CASE WHEN status = 'running' THEN 1 ELSE 0 END) AS m
    FROM ${activeJobs(db)} WHERE model = ${model} AND ${ACTIVE}
    UNION ALL ${edge("asc", "first")}
    UNION ALL ${edge("desc", "last")}
    UNION ALL
    SELECT 'held', NULL, NULL, NULL, NULL, count(*), NULL FROM (
      SELECT 1 FROM jobs WHERE model = ${model} AND ${HELD} LIMIT ${Math.max(1, cap)}) capped`.execute(
    db,
  );
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

/**
 * The model's lanes of held jobs. A backlog of one lane (one tenant alone, the common case
 * of a long one) is known from the line's two edges, its first and last job in lane order,
 * and its count up to the cap; several lanes are grouped over every held job.
 */
async function heldLanes(
  db: Db,
  model: string,
  line: Awaited<ReturnType<typeof lineOf>>,
): Promise<LaneRow[]> {
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
  return held(db, model)
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

/**
 * When each tenant and key last started a job of the model, among its last `RECENT_STARTS`
 * starts of the last minute, by the (model, started_at) index read backwards. Only ties between
 * lanes need it (a pass of one lane reads none). Bounded by count and not only by time: a minute
 * of starts at saturation was 20 000 rows, read on every pass (2.2 ms each, the costliest
 * statement of a saturated run). A lane with no start among them started before all that did,
 * which is what breaking a tie needs to know.
 */
function lastStarts(db: Db, model: string, tenantIds: string[], now: number) {
  return sql<{ tenant_id: string; fairness_key: string | null; at: number | string }>`
    SELECT tenant_id, fairness_key, max(started_at) AS at FROM (
      SELECT tenant_id, fairness_key, started_at FROM jobs
      WHERE model = ${model} AND started_at >= ${now - RECENT_MS}
      ORDER BY started_at DESC LIMIT ${RECENT_STARTS}) recent
    WHERE tenant_id IN (${sql.join(tenantIds)})
    GROUP BY tenant_id, fairness_key`.execute(db);
}

type TenantRow = {
  kind: "model" | "total" | "tenant";
  tenant_id: string;
  fairness_key: string | null;
  n: number | string | null;
  plan: string | null;
  limits: string | null;
};

/**
 * What the fair order weighs of the tenants with held jobs, in one statement: their running
 * and released jobs on the model per `fairness_key`, the same on every model (what
 * `max_running_jobs` bounds), and their plans and overrides. The ids are bound once, in a
 * VALUES list the three parts share (D1 binds at most 100 parameters a statement).
 */
function tenantsOf(db: Db, model: string, tenantIds: string[]) {
  return sql<TenantRow>`
    WITH ids(id) AS (VALUES ${sql.join(tenantIds.map((id) => sql`(${id})`))})
    SELECT 'model' AS kind, tenant_id, fairness_key, count(*) AS n, NULL AS plan, NULL AS limits
    FROM ${activeJobs(db)}
    WHERE tenant_id IN (SELECT id FROM ids) AND model = ${model} AND ${ACTIVE}
    GROUP BY tenant_id, fairness_key
    UNION ALL
    SELECT 'total', tenant_id, NULL, count(*), NULL, NULL FROM ${activeJobs(db)}
    WHERE tenant_id IN (SELECT id FROM ids) AND ${ACTIVE}
    GROUP BY tenant_id
    UNION ALL
    SELECT 'tenant', id, NULL, NULL, plan, limits FROM tenants
    WHERE id IN (SELECT id FROM ids)`.execute(db);
}

/**
 * A snapshot of the model's line for a pass whose window is `window`: two statements (the
 * line, then its tenants), or three when several lanes must be grouped, four with the
 * starts that break their ties. Held jobs are counted up to twice the window: a pass
 * releases at most its room. A pass that finds no room reads nothing more.
 */
export async function snapshot(
  db: Db,
  model: string,
  now: number,
  window: number,
): Promise<ReleaseSnapshot> {
  const line = await lineOf(db, model, 2 * window);
  const counts = { released: line.released, running: line.running };
  const room = Math.max(window, line.running) - line.released;
  const lanes = room > 0 ? await heldLanes(db, model, line) : [];
  // Tenants with the most urgent heads first; at most MAX_TENANTS a pass (D1 binds at most
  // 100 parameters a statement): the rest wait for the next pass.
  const ordered = [...lanes].sort(
    (a, b) => b.priority - a.priority || (a.oldest < b.oldest ? -1 : a.oldest > b.oldest ? 1 : 0),
  );
  const tenantIds = [...new Set(ordered.map((lane) => lane.tenant_id))].slice(0, MAX_TENANTS);
  const [tenantRows, recent] = tenantIds.length
    ? await Promise.all([
        tenantsOf(db, model, tenantIds),
        lanes.length > 1 ? lastStarts(db, model, tenantIds, now) : { rows: [] },
      ])
    : [{ rows: [] }, { rows: [] }];
  const rows = (kind: TenantRow["kind"]) => tenantRows.rows.filter((row) => row.kind === kind);
  return {
    model,
    ...counts,
    lanes: lanes.map((lane) => ({
      priority: Number(lane.priority),
      tenantId: lane.tenant_id,
      fairnessKey: lane.fairness_key,
      held: Number(lane.held),
      oldestId: lane.oldest,
    })),
    active: rows("model").map((row) => ({
      tenantId: row.tenant_id,
      fairnessKey: row.fairness_key,
      count: Number(row.n),
    })),
    tenantActive: new Map(rows("total").map((row) => [row.tenant_id, Number(row.n)])),
    tenants: new Map(
      rows("tenant").map((row) => [
        row.tenant_id,
        { plan: row.plan ?? "free", limits: row.limits },
      ]),
    ),
    lastStarted: recent.rows.map((row) => ({
      tenantId: row.tenant_id,
      fairnessKey: row.fairness_key,
      at: Number(row.at),
    })),
  };
}
