import { sql } from "kysely";
import type { Migration } from "./types.ts";

/**
 * Two indexes every job entered while queued, for readers that never needed it there
 * (issue 29 #2: each entry is a write at submit and, on SQLite, another when the job leaves
 * the index; on Postgres a WAL record for each version of the row that meets the predicate):
 *
 * - `jobs_outbox` (`created_at`, queued and unpublished) has had no reader since the fair
 *   release (0020): the outbox reads released jobs through `jobs_release_outbox`, and held
 *   jobs are the releaser's (`jobs_held`). Every job entered it at submit, a held one again
 *   when released (Postgres), and left it at publish.
 * - `jobs_queued_updated` (0024) served one pass, the silent-queued one, which asks only for
 *   jobs claimed before (`attempt > 0`: a retried job whose message may be lost,
 *   sweep/dead.ts); every fresh job entered it at submit and at its publish mark. It now
 *   holds the retried ones (`jobs_requeued_updated`), which every dialect matches from the
 *   query's own `attempt > ?` (SQLite with the bound value, Postgres in its custom plans).
 *
 * Built before the old one goes.
 */
export const unusedQueuedEntries: Migration = {
  name: "0030_unused_queued_entries",
  async up(db) {
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_requeued_updated ON jobs (updated_at)
      WHERE status = 'queued' AND attempt > 0`.execute(db);
    await sql`DROP INDEX IF EXISTS jobs_queued_updated`.execute(db);
    await sql`DROP INDEX IF EXISTS jobs_outbox`.execute(db);
  },
};
