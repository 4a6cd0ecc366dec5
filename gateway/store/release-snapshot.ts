import { type Kysely, sql } from "kysely";
import { limitClause } from "../../shared/db/inline-limits.ts";
import type { Database } from "../../shared/db/schema.ts";
import {
  ACTIVE,
  activeJobs,
  HOLDS_PLACE,
  heldLanes,
  type Line,
  lineOf,
  windowRoom,
} from "./release-line.ts";

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
  /**
   * Each tenant and key's share of the model's recent starts (its last `RECENT_STARTS` in
   * the last minute): when it last had a job start, and how many of them were its own.
   */
  lastStarted: { tenantId: string; fairnessKey: string | null; at: number; count: number }[];
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

/** How far back a lane's starts count as recent service (fair-order.ts)… */
const RECENT_MS = 60_000;
/** …and among how many of the model's latest starts (`lastStarts`). */
export const RECENT_STARTS = 256;

/**
 * How many of the model's last `RECENT_STARTS` starts of the last minute each tenant and key
 * had, and when its latest was, by the (model, started_at) index read backwards. Only a pass
 * with several lanes needs it (a pass of one lane reads none). Bounded by count and not only
 * by time: a minute of starts at saturation was 20 000 rows, read on every pass (2.2 ms
 * each, the costliest statement of a saturated run). A lane with no start among them
 * started before all that did and has had none of the recent service.
 */
function lastStarts(db: Db, model: string, tenantIds: string[], now: number) {
  return sql<{
    tenant_id: string;
    fairness_key: string | null;
    at: number | string;
    n: number | string;
  }>`
    SELECT tenant_id, fairness_key, max(started_at) AS at, count(*) AS n FROM (
      SELECT tenant_id, fairness_key, started_at FROM jobs
      WHERE model = ${model} AND started_at >= ${now - RECENT_MS}
      ORDER BY started_at DESC ${limitClause(RECENT_STARTS)}) recent
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
    WHERE tenant_id IN (SELECT id FROM ids) AND ${ACTIVE} AND ${HOLDS_PLACE}
    GROUP BY tenant_id
    UNION ALL
    SELECT 'tenant', id, NULL, NULL, plan, limits FROM tenants
    WHERE id IN (SELECT id FROM ids)`.execute(db);
}

/**
 * A snapshot of the model's line for a pass whose window is `window`: two statements (the
 * line, unless the caller just read it, then its tenants), or three when several lanes must
 * be grouped, four with the starts that break their ties. Held jobs are counted up to twice
 * the window: a pass releases at most its room. A pass that finds no room reads nothing more.
 */
export async function snapshot(
  db: Db,
  model: string,
  now: number,
  window: number,
  known?: Line,
): Promise<ReleaseSnapshot> {
  const line = known ?? (await lineOf(db, model, 2 * window));
  const counts = { released: line.released, running: line.running };
  const lanes = windowRoom(line, window) > 0 ? await heldLanes(db, model, line) : [];
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
      count: Number(row.n),
    })),
  };
}
