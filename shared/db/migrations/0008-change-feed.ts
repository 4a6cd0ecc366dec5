import { sql } from "kysely";
import type { Migration } from "./types.ts";

/**
 * The change feed: every job event knows its tenant and where it stands in commit order, and
 * on Postgres every event is announced to every gateway.
 *
 * - `tenant_id` lets `GET /v1/events` read one tenant's events by index instead of joining
 *   every job.
 * - The event's position in commit order. SQLite and D1 have one writer, so the row id is
 *   already in commit order. Postgres allocates ids before commit, so a reader that saw
 *   event 105 may later see 104 commit: instead each event records the id of the
 *   transaction that wrote it (`xid`), and readers only take events whose transaction is
 *   older than every transaction still running (`pg_snapshot_xmin`). Those can no longer
 *   change, so a cursor of (xid, job, seq) loses nothing and repeats nothing. Job ids compare
 *   byte-wise (`COLLATE "C"`), as JavaScript compares them.
 * - `pg_notify` inside the trigger is transactional: the announcement goes out at commit
 *   and never for a rolled-back change. The payload is tiny (tenant, job, seq, status);
 *   listeners read the rest. The channel is per schema (`gantry_` and 16 hex digits of its
 *   md5: channel names stop at 63 bytes, schema names may take all 63), so deployments that
 *   share a database in separate schemas do not wake each other.
 *
 * Redefines `gantry_job_event()` (migration 0005): a later migration that changes it must
 * start from this body.
 */
export const changeFeed: Migration = {
  name: "0008_change_feed",
  async up(db, dialect) {
    if (dialect === "postgres") {
      await sql`ALTER TABLE job_events ADD COLUMN IF NOT EXISTS tenant_id text`.execute(db);
      await sql`ALTER TABLE job_events ADD COLUMN IF NOT EXISTS xid xid8`.execute(db);
      await sql`
        CREATE OR REPLACE FUNCTION gantry_job_event() RETURNS trigger AS $$
        BEGIN
          IF TG_OP = 'UPDATE' AND NEW.last_seq = OLD.last_seq THEN
            RETURN NULL;
          END IF;
          INSERT INTO job_events (job_id, seq, status, attempt, error, at, tenant_id, xid)
          VALUES (
            NEW.id, NEW.last_seq, NEW.status, NEW.attempt,
            CASE WHEN TG_OP = 'INSERT' OR NEW.status = 'running' THEN NULL ELSE NEW.error END,
            NEW.updated_at, NEW.tenant_id, pg_current_xact_id()
          );
          PERFORM pg_notify(
            'gantry_' || left(md5(TG_TABLE_SCHEMA), 16),
            NEW.tenant_id || ' ' || NEW.id || ' ' || NEW.last_seq || ' ' || NEW.status
          );
          RETURN NULL;
        END
        $$ LANGUAGE plpgsql`.execute(db);
      await sql`
        CREATE INDEX IF NOT EXISTS job_events_tenant_order
        ON job_events (tenant_id, xid, job_id COLLATE "C", seq)`.execute(db);
      return;
    }
    const columns = await sql<{ name: string }>`PRAGMA table_info(job_events)`.execute(db);
    if (!columns.rows.some((c) => c.name === "tenant_id")) {
      await sql`ALTER TABLE job_events ADD COLUMN tenant_id text`.execute(db);
    }
    await sql`DROP TRIGGER IF EXISTS jobs_event_on_insert`.execute(db);
    await sql`DROP TRIGGER IF EXISTS jobs_event_on_change`.execute(db);
    await sql`
      CREATE TRIGGER IF NOT EXISTS jobs_event_on_insert AFTER INSERT ON jobs
      BEGIN
        INSERT INTO job_events (job_id, seq, status, attempt, error, at, tenant_id)
        VALUES (NEW.id, NEW.last_seq, NEW.status, NEW.attempt, NULL, NEW.updated_at, NEW.tenant_id);
      END`.execute(db);
    await sql`
      CREATE TRIGGER IF NOT EXISTS jobs_event_on_change AFTER UPDATE OF last_seq ON jobs
      WHEN NEW.last_seq <> OLD.last_seq
      BEGIN
        INSERT INTO job_events (job_id, seq, status, attempt, error, at, tenant_id)
        VALUES (
          NEW.id, NEW.last_seq, NEW.status, NEW.attempt,
          CASE WHEN NEW.status = 'running' THEN NULL ELSE NEW.error END,
          NEW.updated_at, NEW.tenant_id
        );
      END`.execute(db);
    // Rows of one tenant in row-id order: SQLite indexes carry the row id.
    await sql`CREATE INDEX IF NOT EXISTS job_events_tenant ON job_events (tenant_id)`.execute(db);
  },
};
