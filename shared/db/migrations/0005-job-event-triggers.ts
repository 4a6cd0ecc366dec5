import { sql } from "kysely";
import type { Migration } from "./types.ts";

/**
 * Job events written by the database itself, and indexes for the sweeper's scans.
 *
 * Every state change bumps `jobs.last_seq`; a trigger appends the matching `job_events` row
 * in the same statement. The event can no longer be lost between two statements (a crash
 * after the UPDATE used to leave a state without its event), and each state change is one
 * round trip and one commit instead of two: on the hot path (submit, claim, report) that
 * halves the statements and the WAL flushes per job.
 *
 * The event's error is the job's, except for `running`, whose row still carries the error
 * of the attempt before (it is cleared on claim, but an event of a running attempt has no
 * error of its own). Insert events never carry one.
 */
export const jobEventTriggers: Migration = {
  name: "0005_job_event_triggers",
  async up(db, dialect) {
    if (dialect === "postgres") {
      await sql`
        CREATE OR REPLACE FUNCTION gantry_job_event() RETURNS trigger AS $$
        BEGIN
          IF TG_OP = 'UPDATE' AND NEW.last_seq = OLD.last_seq THEN
            RETURN NULL;
          END IF;
          INSERT INTO job_events (job_id, seq, status, attempt, error, at)
          VALUES (
            NEW.id, NEW.last_seq, NEW.status, NEW.attempt,
            CASE WHEN TG_OP = 'INSERT' OR NEW.status = 'running' THEN NULL ELSE NEW.error END,
            NEW.updated_at
          );
          RETURN NULL;
        END
        $$ LANGUAGE plpgsql`.execute(db);
      await sql`
        CREATE OR REPLACE TRIGGER jobs_append_event
        AFTER INSERT OR UPDATE OF last_seq ON jobs
        FOR EACH ROW EXECUTE FUNCTION gantry_job_event()`.execute(db);
    } else {
      await sql`
        CREATE TRIGGER IF NOT EXISTS jobs_event_on_insert AFTER INSERT ON jobs
        BEGIN
          INSERT INTO job_events (job_id, seq, status, attempt, error, at)
          VALUES (NEW.id, NEW.last_seq, NEW.status, NEW.attempt, NULL, NEW.updated_at);
        END`.execute(db);
      await sql`
        CREATE TRIGGER IF NOT EXISTS jobs_event_on_change AFTER UPDATE OF last_seq ON jobs
        WHEN NEW.last_seq <> OLD.last_seq
        BEGIN
          INSERT INTO job_events (job_id, seq, status, attempt, error, at)
          VALUES (
            NEW.id, NEW.last_seq, NEW.status, NEW.attempt,
            CASE WHEN NEW.status = 'running' THEN NULL ELSE NEW.error END,
            NEW.updated_at
          );
        END`.execute(db);
    }
    // The outbox pass: queued jobs never confirmed published. Partial, so it stays as small
    // as the outbox itself instead of growing with every job ever run.
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_outbox ON jobs (created_at)
      WHERE status = 'queued' AND published_at IS NULL`.execute(db);
    // The stale-running pass, oldest heartbeat first.
    await db.schema
      .createIndex("jobs_status_updated")
      .ifNotExists()
      .on("jobs")
      .columns(["status", "updated_at"])
      .execute();
    // The plan's bound on queued jobs, counted per tenant.
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_tenant_queued ON jobs (tenant_id)
      WHERE status = 'queued'`.execute(db);
  },
};
