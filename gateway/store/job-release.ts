import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { isPostgresDb } from "./job-metadata.ts";
import { JOB_COLUMNS, type JobRow } from "./job-rows.ts";
import { ACTIVE, activeJobs, HELD, heldInLane, lineOf } from "./release-line.ts";
import { type Chooser, type ReleasePick, snapshot } from "./release-snapshot.ts";

/**
 * The store's half of the fair release (gateway/jobs/release.ts): marking the jobs the
 * releaser picked from a snapshot of the model's line (release-snapshot.ts) as released, in
 * one pass that is safe with several gateways at once.
 *
 * The snapshot is read with no lock: it only orders the lanes. What must be exact is checked
 * again where the jobs are marked: each lane's UPDATE counts the tenant's running and
 * released jobs (its `max_running_jobs`) and the model's released ones (the window) in its
 * own condition, and marks nothing when either would be exceeded. On Postgres those UPDATEs
 * run in one transaction behind a transaction-scoped advisory lock, so passes of every
 * gateway take turns and each UPDATE's counts see the previous pass's commit. SQLite and
 * D1 have a single writer, which makes each UPDATE exact by itself (D1 has no interactive
 * transactions).
 */

type Db = Kysely<Database>;

/** A transaction-scoped lock all the gateways' release passes share ("gantry" + "release"). */
const RELEASE_LOCK = 0x67616e7472_79;

/**
 * One lane's oldest held jobs marked released, unless that would take the tenant past
 * `maxActive` running and released jobs or the model past `cap` released ones (both counted
 * in the same statement, which sees every earlier pass: the snapshot the pick came from may
 * be older).
 */
async function releaseLane(db: Db, model: string, pick: ReleasePick, cap: number, now: number) {
  const oldest = sql`
    SELECT id FROM jobs WHERE ${heldInLane(model, pick)} ORDER BY id LIMIT ${pick.count}`;
  // Postgres may plan `id IN (subquery)` as a nested loop that runs the subquery once per
  // held job (it did, with statistics taken while the table was small: 2.5 s a lane behind
  // 3 000 held jobs); `= ANY(ARRAY(…))` is evaluated once. SQLite runs an uncorrelated IN once.
  const picked = isPostgresDb(db) ? sql`id = ANY(ARRAY(${oldest}))` : sql`id IN (${oldest})`;
  const { rows } = await sql<JobRow>`
    UPDATE jobs SET released_at = ${now}
    WHERE ${picked} AND ${HELD}
      AND (SELECT count(*) FROM ${activeJobs(db)}
           WHERE tenant_id = ${pick.tenantId} AND ${ACTIVE}) + ${pick.count} <= ${pick.maxActive}
      AND (SELECT count(*) FROM ${activeJobs(db)}
           WHERE model = ${model} AND ${ACTIVE} AND status = 'queued')
          + ${pick.count} <= ${cap}
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
  // Most passes have nothing to do: under a flood the window is full, and at ordinary load
  // the pass after a claim or an end finds nothing held. One read of the line says so. A
  // room that opens after it was opened by a claim or an end, and a job held after it by a
  // submit, each of which starts a pass of its own.
  const line = await lineOf(db, model, 2 * window);
  const cap = Math.max(window, line.running);
  if (cap - line.released <= 0 || !line.first) return [];
  const picks = choose(await snapshot(db, model, now, window, line));
  if (picks.length === 0) return [];
  const mark = async (tx: Db) => {
    const lanes: JobRow[][] = [];
    for (const pick of picks) lanes.push(await releaseLane(tx, model, pick, cap, now));
    // Published in turn across the lanes, so that one pass does not queue a tenant's whole
    // share in the broker ahead of the others'.
    const released: JobRow[] = [];
    for (let i = 0; released.length < lanes.flat().length; i++) {
      for (const lane of lanes) if (lane[i]) released.push(lane[i] as JobRow);
    }
    return released;
  };
  return isPostgresDb(db) ? underReleaseLock(db, mark) : mark(db);
}

/**
 * `work` in a transaction that holds the release lock. Hand-rolled rather than Kysely's
 * `transaction()` so that BEGIN and the lock are one round trip (a simple query: it has no
 * parameters): on a busy box each round trip to Postgres is a wake-up of its backend, and a
 * pass's round trips are what a paced job waits for between its commit and its publish.
 */
async function underReleaseLock<T>(db: Db, work: (tx: Db) => Promise<T>): Promise<T> {
  return db.connection().execute(async (tx) => {
    await sql.raw(`BEGIN; SELECT pg_advisory_xact_lock(${RELEASE_LOCK})`).execute(tx);
    try {
      const result = await work(tx);
      await sql`COMMIT`.execute(tx);
      return result;
    } catch (error) {
      // Never hand the connection back inside a transaction; if even the ROLLBACK fails the
      // connection is broken, and Postgres ends its transaction with it.
      await sql`ROLLBACK`.execute(tx).catch(() => undefined);
      throw error;
    }
  });
}

/** A tenant's running and released jobs, every model: what `max_running_jobs` bounds. */
export async function activeCount(db: Db, tenantId: string): Promise<number> {
  const { rows } = await sql<{ n: number | string }>`
    SELECT count(*) AS n FROM ${activeJobs(db)} WHERE tenant_id = ${tenantId} AND ${ACTIVE}`.execute(
    db,
  );
  return Number(rows[0]?.n ?? 0);
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
