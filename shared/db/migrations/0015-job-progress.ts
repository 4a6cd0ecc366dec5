import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import type { Migration } from "./types.ts";

/**
 * A running job's latest progress: one JSON text column,
 * `{attempt, fraction, stage, message, at}`, overwritten by each job heartbeat that carries
 * progress. No `job_events` row per report: progress is latest-only, and a row per tick would
 * grow the event history without bound.
 *
 * The column is in no index, so on Postgres a progress update that leaves the indexed
 * `updated_at` alone stays a HOT update, writing no index entries (the store moves
 * `updated_at` at most once a second on progress beats: gateway/store/job-progress.ts).
 *
 * On Postgres a trigger announces each change of a running job's progress on the change
 * feed's channel (migration 0008), transactionally, as `tenant job progress model <json>`: the
 * JSON is small (stage ≤ 64, message ≤ 256 characters) and listeners take it from the
 * payload without a read. SQLite and D1 have one gateway process per database (or poll),
 * which announces in process.
 */
export const jobProgress: Migration = {
  name: "0015_job_progress",
  async up(db, dialect) {
    await addColumn(db, dialect, "jobs", "progress", sql`text`);
    if (dialect !== "postgres") return;
    await sql`
      CREATE OR REPLACE FUNCTION gantry_job_progress() RETURNS trigger AS $$
      BEGIN
        PERFORM pg_notify(
          'gantry_' || left(md5(TG_TABLE_SCHEMA), 16),
          NEW.tenant_id || ' ' || NEW.id || ' progress ' || NEW.model || ' ' || NEW.progress
        );
        RETURN NULL;
      END
      $$ LANGUAGE plpgsql`.execute(db);
    await sql`DROP TRIGGER IF EXISTS jobs_progress_notify ON jobs`.execute(db);
    await sql`
      CREATE TRIGGER jobs_progress_notify AFTER UPDATE OF progress ON jobs
      FOR EACH ROW
      WHEN (NEW.status = 'running' AND NEW.progress IS NOT NULL
            AND NEW.progress IS DISTINCT FROM OLD.progress)
      EXECUTE FUNCTION gantry_job_progress()`.execute(db);
  },
};
