import { sql } from "kysely";
import type { Migration } from "./types.ts";

/**
 * The sweeper's indexes hold only the jobs it looks for (issue 29 #2): `(status, updated_at)`
 * and `(status, expires_at)` covered every job ever kept, so every change of a job, its end
 * too, wrote an entry in both, and both grew with the finished jobs the sweeper never reads.
 * Partial now, one per state the passes query (each query names its state, which is what
 * lets SQLite use a partial index):
 *
 * - `jobs_running_updated`: running jobs by last sign of life (the stale-running pass);
 * - `jobs_queued_updated`: queued jobs by last change (the silent-queued pass);
 * - `jobs_queued_expires`: queued jobs by expiry (the expiry pass).
 *
 * A claim writes one entry where it wrote two, an end none where it wrote two.
 */
export const activeJobIndexes: Migration = {
  name: "0024_active_job_indexes",
  async up(db) {
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_running_updated ON jobs (updated_at)
      WHERE status = 'running'`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_queued_updated ON jobs (updated_at)
      WHERE status = 'queued'`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_queued_expires ON jobs (expires_at)
      WHERE status = 'queued'`.execute(db);
    await sql`DROP INDEX IF EXISTS jobs_status_updated`.execute(db);
    await sql`DROP INDEX IF EXISTS jobs_status_expires`.execute(db);
  },
};
