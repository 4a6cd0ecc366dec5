import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { isPostgresDb } from "./job-metadata.ts";
import { JOB_COLUMNS, type JobRow } from "./job-rows.ts";

/**
 * The store's half of the fair release (gateway/jobs/release.ts): what a model's line looks
 * like now, and marking the jobs the releaser picked as released, in one pass that is safe
 * with several gateways at once.
 *
 * On Postgres the pass is one transaction behind a transaction-scoped advisory lock: passes
 * of every gateway take turns, so each sees the counts the previous one left and no tenant
 * is released past its `max_running_jobs`. SQLite and D1 have a single writer and D1 no
 * interactive transactions: there each release is one UPDATE whose condition counts the
 * tenant's running and released jobs itself, which the single writer makes exact.
 */

type Db = Kysely<Database>;

/** A transaction-scoped lock all the gateways' release passes share ("gantry" + "release"). */
const RELEASE_LOCK = 0x67616e7472_79;

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

const ACTIVE = sql`(status = 'running' OR (status = 'queued' AND released_at IS NOT NULL))`;

/** A model's released jobs not yet taken, and its running jobs. */
async function windowCounts(db: Db, model: string) {
  const { rows } = await sql<{ released: number | string | null; running: number | string | null }>`
    SELECT sum(CASE WHEN status = 'queued' THEN 1 ELSE 0 END) AS released,
           sum(CASE WHEN status = 'running' THEN 1 ELSE 0 END) AS running
    FROM jobs WHERE model = ${model} AND ${ACTIVE}`.execute(db);
  return { released: Number(rows[0]?.released ?? 0), running: Number(rows[0]?.running ?? 0) };
}

/** How far back a lane's last start counts for breaking ties (fair-order.ts). */
const RECENT_MS = 60_000;

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
function heldInLane(
  model: string,
  lane: { priority: number; tenantId: string; fairnessKey: string | null },
) {
  const key =
    lane.fairnessKey === null ? sql`fairness_key IS NULL` : sql`fairness_key = ${lane.fairnessKey}`;
  return sql`model = ${model} AND status = 'queued' AND released_at IS NULL
    AND priority = ${lane.priority} AND tenant_id = ${lane.tenantId} AND ${key}`;
}

/**
 * The model's lanes of held jobs. A backlog of one lane (one tenant alone, the common case
 * of a long one) is found by two probes of `jobs_held`, its first and last job in lane
 * order, and counted only up to `cap`; several lanes are grouped over every held job.
 */
async function heldLanes(db: Db, model: string, cap: number): Promise<LaneRow[]> {
  const edge = (direction: "asc" | "desc") =>
    held(db, model)
      .select(["priority", "tenant_id", "fairness_key", "id"])
      .orderBy("priority", direction)
      .orderBy("tenant_id", direction)
      .orderBy("fairness_key", direction)
      .orderBy("id", direction)
      .limit(1)
      .executeTakeFirst();
  const [first, last] = await Promise.all([edge("asc"), edge("desc")]);
  if (!first || !last) return [];
  const oneLane =
    first.priority === last.priority &&
    first.tenant_id === last.tenant_id &&
    first.fairness_key === last.fairness_key;
  if (oneLane) {
    const lane = {
      priority: first.priority,
      tenantId: first.tenant_id,
      fairnessKey: first.fairness_key,
    };
    const { rows } = await sql<{ n: number | string }>`
      SELECT count(*) AS n FROM (
        SELECT 1 FROM jobs WHERE ${heldInLane(model, lane)} LIMIT ${Math.max(1, cap)}) capped`.execute(
      db,
    );
    return [{ ...first, held: rows[0]?.n ?? 0, oldest: first.id }];
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

async function snapshot(db: Db, model: string, now: number, cap: number): Promise<ReleaseSnapshot> {
  const [counts, lanes] = await Promise.all([windowCounts(db, model), heldLanes(db, model, cap)]);
  // Tenants with the most urgent heads first; at most MAX_TENANTS a pass (D1 binds at most
  // 100 parameters a statement): the rest wait for the next pass.
  const ordered = [...lanes].sort(
    (a, b) => b.priority - a.priority || (a.oldest < b.oldest ? -1 : a.oldest > b.oldest ? 1 : 0),
  );
  const tenantIds = [...new Set(ordered.map((lane) => lane.tenant_id))].slice(0, MAX_TENANTS);
  const [active, totals, tenants, recent] = tenantIds.length
    ? await Promise.all([
        sql<{ tenant_id: string; fairness_key: string | null; n: number | string }>`
          SELECT tenant_id, fairness_key, count(*) AS n FROM jobs
          WHERE tenant_id IN (${sql.join(tenantIds)}) AND model = ${model} AND ${ACTIVE}
          GROUP BY tenant_id, fairness_key`.execute(db),
        sql<{ tenant_id: string; n: number | string }>`
          SELECT tenant_id, count(*) AS n FROM jobs
          WHERE tenant_id IN (${sql.join(tenantIds)}) AND ${ACTIVE}
          GROUP BY tenant_id`.execute(db),
        db
          .selectFrom("tenants")
          .select(["id", "plan", "limits"])
          .where("id", "in", tenantIds)
          .execute(),
        // By the (model, started_at) index: only the last minute's starts.
        sql<{ tenant_id: string; fairness_key: string | null; at: number | string }>`
          SELECT tenant_id, fairness_key, max(started_at) AS at FROM jobs
          WHERE model = ${model} AND started_at >= ${now - RECENT_MS}
            AND tenant_id IN (${sql.join(tenantIds)})
          GROUP BY tenant_id, fairness_key`.execute(db),
      ])
    : [{ rows: [] }, { rows: [] }, [], { rows: [] }];
  return {
    model,
    ...counts,
    lanes: lanes.map((lane) => ({
      priority: lane.priority,
      tenantId: lane.tenant_id,
      fairnessKey: lane.fairness_key,
      held: Number(lane.held),
      oldestId: lane.oldest,
    })),
    active: active.rows.map((row) => ({
      tenantId: row.tenant_id,
      fairnessKey: row.fairness_key,
      count: Number(row.n),
    })),
    tenantActive: new Map(totals.rows.map((row) => [row.tenant_id, Number(row.n)])),
    tenants: new Map(tenants.map((row) => [row.id, { plan: row.plan, limits: row.limits }])),
    lastStarted: recent.rows.map((row) => ({
      tenantId: row.tenant_id,
      fairnessKey: row.fairness_key,
      at: Number(row.at),
    })),
  };
}

/**
 * One lane's oldest held jobs marked released, unless that would take the tenant past
 * `maxActive` running and released jobs (counted in the same statement).
 */
async function releaseLane(db: Db, model: string, pick: ReleasePick, now: number) {
  const oldest = sql`
    SELECT id FROM jobs WHERE ${heldInLane(model, pick)} ORDER BY id LIMIT ${pick.count}`;
  // Postgres may plan `id IN (subquery)` as a nested loop that runs the subquery once per
  // held job (it did, with statistics taken while the table was small: 2.5 s a lane behind
  // 3 000 held jobs); `= ANY(ARRAY(…))` is evaluated once. SQLite runs an uncorrelated IN once.
  const picked = isPostgresDb(db) ? sql`id = ANY(ARRAY(${oldest}))` : sql`id IN (${oldest})`;
  const { rows } = await sql<JobRow>`
    UPDATE jobs SET released_at = ${now}
    WHERE ${picked}
      AND status = 'queued' AND released_at IS NULL
      AND (SELECT count(*) FROM jobs
           WHERE tenant_id = ${pick.tenantId} AND ${ACTIVE}) + ${pick.count} <= ${pick.maxActive}
    RETURNING ${sql.join(JOB_COLUMNS.map((column) => sql.ref(column)))}`.execute(db);
  return rows.sort((a, b) => (a.id < b.id ? -1 : 1));
}

/**
 * A release pass of `model`: reads its line, lets `choose` pick (gateway/jobs/fair-order.ts),
 * marks the picks released and returns them taken in turn from each lane. A job marked released is
 * the outbox's to publish if the gateway dies before it does (`unreleasedOutbox`).
 */
export async function releaseJobs(
  db: Db,
  model: string,
  window: number,
  choose: Chooser,
  now: number,
): Promise<JobRow[]> {
  // Most passes under load find the window full: one small count, no lock, no more. A
  // room that opens after this read was opened by a claim or an end, whose own pass follows.
  const { released, running } = await windowCounts(db, model);
  const room = Math.max(window, running) - released;
  if (room <= 0) return [];
  const pass = async (tx: Db) => {
    // Counted up to twice the room seen before the lock: a pass releases at most its room.
    const picks = choose(await snapshot(tx, model, now, 2 * room));
    const lanes: JobRow[][] = [];
    for (const pick of picks) lanes.push(await releaseLane(tx, model, pick, now));
    // Published in turn across the lanes, so that one pass does not queue a tenant's whole
    // share in the broker ahead of the others'.
    const released: JobRow[] = [];
    for (let i = 0; released.length < lanes.flat().length; i++) {
      for (const lane of lanes) if (lane[i]) released.push(lane[i] as JobRow);
    }
    return released;
  };
  if (!isPostgresDb(db)) return pass(db);
  return db.transaction().execute(async (tx) => {
    await sql`SELECT pg_advisory_xact_lock(${RELEASE_LOCK})`.execute(tx);
    return pass(tx);
  });
}

/** A tenant's running and released jobs, every model: what `max_running_jobs` bounds. */
export async function activeCount(db: Db, tenantId: string): Promise<number> {
  const { rows } = await sql<{ n: number | string }>`
    SELECT count(*) AS n FROM jobs WHERE tenant_id = ${tenantId} AND ${ACTIVE}`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** Models with jobs held in the store, for the sweep's release pass. */
export async function heldModels(db: Db, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom("jobs")
    .select("model")
    .distinct()
    .where("status", "=", "queued")
    .where("released_at", "is", null)
    .limit(limit)
    .execute();
  return rows.map((row) => row.model);
}
