import { sql } from "kysely";
import type { Migration } from "./types.ts";

/**
 * The session setting a gateway turns its announcements off with, when no other gateway
 * listens (gateway/feed/announce-peers.ts): `SET gantry.announce = 'off'`.
 */
export const ANNOUNCE_SETTING = "gantry.announce";

/**
 * The jobs triggers announce a change only where the writing session has not turned
 * announcements off (Postgres; issue 29).
 *
 * Every job event was announced with `pg_notify` (migrations 0008 and 0015), three a job at
 * the least, for the other gateways' streams. With one gateway nobody else listens, and the
 * announcement came back to the gateway that made the change and had told its own streams
 * already: the notification queue, a wake of the listening backend and a read of the
 * payload, per event. Measured at 200 jobs/s (queue-e2e's paced shape, every completion
 * heard): Postgres 1.5 → 1.1–1.3 ms of CPU a job without the announcements.
 *
 * A gateway turns them off on its own connections only while it sees no other listener
 * (`announce-peers.ts`), so anything else that writes jobs (the CLI, an older gateway, a
 * psql session) still announces: an unset setting announces.
 *
 * Redefines `gantry_job_event()` from migration 0008's body and `gantry_job_progress()`
 * from 0015's: a later migration that changes them must start from these.
 */
export const quietAnnouncements: Migration = {
  name: "0029_quiet_announcements",
  async up(db, dialect) {
    if (dialect !== "postgres") return;
    /** `pg_notify` on the schema's channel, unless the session turned announcements off. */
    const announce = (payload: string) =>
      sql.raw(`IF coalesce(current_setting('${ANNOUNCE_SETTING}', true), '') <> 'off' THEN
          PERFORM pg_notify('gantry_' || left(md5(TG_TABLE_SCHEMA), 16), ${payload});
        END IF;`);
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
        ${announce("NEW.tenant_id || ' ' || NEW.id || ' ' || NEW.last_seq || ' ' || NEW.status")}
        RETURN NULL;
      END
      $$ LANGUAGE plpgsql`.execute(db);
    await sql`
      CREATE OR REPLACE FUNCTION gantry_job_progress() RETURNS trigger AS $$
      BEGIN
        ${announce("NEW.tenant_id || ' ' || NEW.id || ' progress ' || NEW.model || ' ' || NEW.progress")}
        RETURN NULL;
      END
      $$ LANGUAGE plpgsql`.execute(db);
  },
};
