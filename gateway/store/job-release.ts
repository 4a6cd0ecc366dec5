import { type Kysely, sql } from "kysely";
import { limitClause } from "../../shared/db/inline-limits.ts";
import type { Database } from "../../shared/db/schema.ts";
import { isPostgresDb } from "./job-metadata.ts";
import { JOB_COLUMNS, type JobRow } from "./job-rows.ts";
import {
  ACTIVE,
  activeJobs,
  HELD,
  HOLDS_PLACE,
  heldInLane,
  type Line,
  lineOf,
  tenantActive,
  windowRoom,
} from "./release-line.ts";
import { type Chooser, type ReleasePick, snapshot } from "./release-snapshot.ts";

/**
 * The store's half of the fair release (gateway/jobs/release.ts): marking the jobs the
 * releaser picked from a snapshot of the model's line (release-snapshot.ts) as released, in
 * one pass that is safe with several gateways at once.
 *
 * On Postgres the pass is one transaction behind a transaction-scoped advisory lock: passes
 * of every gateway take turns, so each sees the counts the previous one left and no tenant
 * is released past its `max_running_jobs`. SQLite and D1 have a single writer and D1 no
 * interactive transactions: there each release is one UPDATE whose condition counts the
 * tenant's running and released jobs itself, which the single writer makes exact.
 */

type Db = Kysely<Database>;

/** A transaction-scoped lock all the gateways' release passes share ("gantry" + "release"). */
export const RELEASE_LOCK = 0x67616e7472_79;

/**
 * One lane's oldest held jobs marked released, unless that would take the tenant past
 * `maxActive` running and released jobs (counted in the same statement). `from`: the lane's
 * oldest held job, as the pass's snapshot saw it. The ids are read from there on: in id
 * order, a table of finished jobs comes before its backlog, and Postgres, sure that most
 * rows are held (they are, just after a burst), would walk the primary key through every
 * finished job to find the first held ones (2 008 rows for 8, in
 * test/store/release-plan-postgres.test.ts).
 */
async function releaseLane(db: Db, model: string, pick: ReleasePick, now: number, from: string) {
  const oldest = sql`
    SELECT id FROM jobs WHERE ${heldInLane(model, pick)} AND id >= ${from}
    ORDER BY id ${limitClause(pick.count)}`;
  // Postgres may plan `id IN (subquery)` as a nested loop that runs the subquery once per
  // held job (it did, with statistics taken while the table was small: 2.5 s a lane behind
  // 3 000 held jobs); `= ANY(ARRAY(…))` is evaluated once. SQLite runs an uncorrelated IN once.
  const picked = isPostgresDb(db) ? sql`id = ANY(ARRAY(${oldest}))` : sql`id IN (${oldest})`;
  const { rows } = await sql<JobRow>`
    UPDATE jobs SET released_at = ${now}
    WHERE ${picked} AND ${HELD}
      AND ${tenantActive(db, pick.tenantId)} + ${pick.count} <= ${pick.maxActive}
    RETURNING ${sql.join(JOB_COLUMNS.map((column) => sql.ref(column)))}`.execute(db);
  return rows.sort((a, b) => (a.id < b.id ? -1 : 1));
}

/** What a release pass did: the jobs it released, and whether any of the model's waited. */
export interface ReleasePass {
  released: JobRow[];
  /**
   * Jobs of the model were held when the pass read its line (some may still be): the next
   * room that opens is theirs. False: nothing of the model waits in the store.
   */
  held: boolean;
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
): Promise<ReleasePass> {
  // Most passes have nothing to do: under a flood the window is full, and at ordinary load
  // the pass after a claim or an end finds nothing held. One read of the line, with no lock
  // and no transaction, says so. A room that opens after it was opened by a claim or an
  // end, and a job held after it by a submit, each of which starts a pass of its own.
  // SQLite and D1 take no lock, so that read is the pass's own line; Postgres reads it again
  // under the lock, and here counts its held jobs no further than it needs to know any.
  const postgres = isPostgresDb(db);
  const line = await lineOf(db, model, postgres ? 1 : 2 * window);
  if (!line.first) return { released: [], held: false };
  if (windowRoom(line, window) <= 0) return { released: [], held: true };
  const pass = async (tx: Db, known?: Line) => {
    const seen = await snapshot(tx, model, now, window, known);
    const lanes: JobRow[][] = [];
    for (const pick of choose(seen)) {
      const lane = seen.lanes.find(
        (held) =>
          held.priority === pick.priority &&
          held.tenantId === pick.tenantId &&
          held.fairnessKey === pick.fairnessKey,
      );
      if (lane) lanes.push(await releaseLane(tx, model, pick, now, lane.oldestId));
    }
    // Published in turn across the lanes, so that one pass does not queue a tenant's whole
    // share in the broker ahead of the others'.
    const released: JobRow[] = [];
    const longest = Math.max(0, ...lanes.map((lane) => lane.length));
    for (let i = 0; i < longest; i++) {
      for (const lane of lanes) if (lane[i]) released.push(lane[i] as JobRow);
    }
    return released;
  };
  const released = postgres
    ? await db.transaction().execute(async (tx) => {
        await sql`SELECT pg_advisory_xact_lock(${RELEASE_LOCK})`.execute(tx);
        return pass(tx);
      })
    : await pass(db, line);
  return { released, held: true };
}

/** Of a model, a tenant's jobs that hold its places: running, and released not yet taken. */
export type ActiveOnModel = { model: string; running: number; released: number };

/**
 * A tenant's jobs holding its places, per model: what `max_running_jobs` bounds (the same
 * jobs as `tenantActive`), read for a waiting job's reason, which names them.
 */
export async function activeByModel(db: Db, tenantId: string): Promise<ActiveOnModel[]> {
  const { rows } = await sql<{
    model: string;
    running: number | string;
    released: number | string;
  }>`
    SELECT model, sum(CASE WHEN status = 'running' THEN 1 ELSE 0 END) AS running,
           sum(CASE WHEN status = 'queued' THEN 1 ELSE 0 END) AS released
    FROM ${activeJobs(db)}
    WHERE tenant_id = ${tenantId} AND ${ACTIVE} AND ${HOLDS_PLACE}
    GROUP BY model ORDER BY model`.execute(db);
  return rows.map((row) => ({
    model: row.model,
    running: Number(row.running),
    released: Number(row.released),
  }));
}

/** Models with jobs held in the store, for the sweep's release pass. */
export async function heldModels(db: Db, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom("jobs")
    .select("model")
    .distinct()
    .where(HELD)
    .limit(limit)
    .execute();
  return rows.map((row) => row.model);
}
