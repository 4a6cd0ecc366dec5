import { type InsertObject, type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { RELEASE_LOCK } from "./job-release.ts";
import type { JobRow } from "./job-rows.ts";
import { ACTIVE, HELD } from "./release-line.ts";

type Db = Kysely<Database>;
type JobInsert = InsertObject<Database, "jobs">;

/** When a submitted job may skip the wait for a release pass (job-inserts.ts, `NewJob`). */
export interface ReleaseIfFree {
  /** The model's release window (gateway/jobs/release.ts). */
  window: number;
  /** The tenant's `max_running_jobs`: running and released jobs, every model. */
  maxActive: number;
}

/** A row to insert, and when it may go out released at once. */
export interface Candidate {
  row: JobInsert & { model: string; tenant_id: string };
  releaseIfFree: ReleaseIfFree | null;
}

/**
 * A group of submits inserted with their release decided in the same transaction, on
 * Postgres (issue 29: the pass after each submit cost seven round trips; this costs two more
 * than the insert alone, and none after it).
 *
 * Under the release passes' own lock (job-release.ts), so that the insert's snapshot sees
 * every release committed before it, each row goes in released when a pass would release it
 * now: none of its model's jobs is held (nobody waits, so there is no order to keep), the
 * model's window has room for every row of the model in the group, and its tenant stays
 * within `max_running_jobs` with every row of the tenant's in the group. Otherwise it is
 * held, and the pass the submit starts releases it in fair order.
 *
 * The caller publishes what comes back released; a gateway that dies first leaves released,
 * unpublished jobs, which the outbox publishes (as after a pass).
 */
export async function insertReleasing(
  db: Db,
  candidates: Candidate[],
  now: number,
  insert: (db: Db, rows: JobInsert[]) => Promise<JobRow[]>,
): Promise<JobRow[]> {
  const count = (of: (c: Candidate) => boolean) => candidates.filter(of).length;
  const rows = candidates.map(({ row, releaseIfFree }) => {
    if (!releaseIfFree) return row;
    const ofModel = count((c) => c.row.model === row.model);
    const ofTenant = count((c) => c.row.tenant_id === row.tenant_id);
    return { ...row, released_at: releasedIfFree(row, releaseIfFree, ofModel, ofTenant, now) };
  });
  return db.connection().execute(async (conn) => {
    // One round trip for both: no parameters, so pg sends it as a simple query, which may
    // hold several statements (the lock is a constant).
    await sql.raw(`BEGIN; SELECT pg_advisory_xact_lock(${RELEASE_LOCK})`).execute(conn);
    try {
      const inserted = await insert(conn, rows);
      await sql.raw("COMMIT").execute(conn);
      return inserted;
    } catch (error) {
      await sql.raw("ROLLBACK").execute(conn);
      throw error;
    }
  });
}

/** `now` when a pass would release the row at once, else null (see `insertReleasing`). */
function releasedIfFree(
  row: Candidate["row"],
  limits: ReleaseIfFree,
  ofModel: number,
  ofTenant: number,
  now: number,
) {
  const { model, tenant_id: tenantId } = row;
  // The window as a pass counts it (job-release.ts): never smaller than what runs.
  return sql<number | null>`CASE WHEN
    NOT EXISTS (SELECT 1 FROM jobs WHERE model = ${model} AND ${HELD})
    AND (SELECT count(*) FROM jobs WHERE model = ${model} AND status = 'queued'
         AND released_at IS NOT NULL) + ${ofModel}::bigint
      <= GREATEST(${limits.window}::bigint,
                  (SELECT count(*) FROM jobs WHERE model = ${model} AND status = 'running'))
    AND (SELECT count(*) FROM jobs WHERE tenant_id = ${tenantId} AND ${ACTIVE})
        + ${ofTenant}::bigint <= ${limits.maxActive}::bigint
    THEN ${now}::bigint END`;
}
