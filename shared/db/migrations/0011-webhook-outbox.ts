import { sql } from "kysely";
import { instant, type Migration } from "./types.ts";

/**
 * The webhook outbox: a state change of a job that has a webhook can no longer lose its
 * delivery to a gateway dying between the commit and the delivery insert.
 *
 * - A trigger of its own (beside `gantry_job_event`, which it leaves alone) records each
 *   `running` or terminal change of a job with a webhook in `webhook_outbox`, in the same
 *   statement as the change. The gateway's fast path then inserts the delivery as before;
 *   the sweeper takes outbox rows older than a grace period, enqueues the deliveries that
 *   are missing (for the events the job subscribed to) and deletes the rows. So the outbox
 *   holds only the last few seconds of webhook events, and costs jobs without a webhook
 *   nothing.
 * - `webhook_deliveries.event_seq` names the job event a delivery is for, unique per job:
 *   the fast path and the sweeper racing for one event make one delivery, one `webhook-id`.
 *   Rows from before this migration have none (NULLs are distinct in a unique index).
 */
export const webhookOutbox: Migration = {
  name: "0011_webhook_outbox",
  async up(db, dialect) {
    if (dialect === "postgres") {
      await sql`ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS event_seq integer`.execute(
        db,
      );
    } else {
      const columns = await sql<{ name: string }>`PRAGMA table_info(webhook_deliveries)`.execute(
        db,
      );
      if (!columns.rows.some((c) => c.name === "event_seq")) {
        await sql`ALTER TABLE webhook_deliveries ADD COLUMN event_seq integer`.execute(db);
      }
    }
    await sql`
      CREATE UNIQUE INDEX IF NOT EXISTS webhook_deliveries_event
      ON webhook_deliveries (job_id, event_seq)`.execute(db);
    await db.schema
      .createTable("webhook_outbox")
      .ifNotExists()
      .addColumn("job_id", "text", (c) => c.notNull())
      .addColumn("seq", "integer", (c) => c.notNull())
      .addColumn("at", instant(dialect), (c) => c.notNull())
      .addPrimaryKeyConstraint("webhook_outbox_pk", ["job_id", "seq"])
      .execute();
    await sql`CREATE INDEX IF NOT EXISTS webhook_outbox_at ON webhook_outbox (at)`.execute(db);
    const events = sql.raw(`'running', 'succeeded', 'failed', 'canceled', 'expired'`);
    if (dialect === "postgres") {
      await sql`
        CREATE OR REPLACE FUNCTION gantry_webhook_outbox() RETURNS trigger AS $$
        BEGIN
          INSERT INTO webhook_outbox (job_id, seq, at)
          VALUES (NEW.id, NEW.last_seq, NEW.updated_at)
          ON CONFLICT DO NOTHING;
          RETURN NULL;
        END
        $$ LANGUAGE plpgsql`.execute(db);
      await sql`
        CREATE OR REPLACE TRIGGER jobs_webhook_outbox
        AFTER UPDATE OF last_seq ON jobs
        FOR EACH ROW
        WHEN (NEW.webhook IS NOT NULL AND NEW.last_seq <> OLD.last_seq
              AND NEW.status IN (${events}))
        EXECUTE FUNCTION gantry_webhook_outbox()`.execute(db);
    } else {
      await sql`
        CREATE TRIGGER IF NOT EXISTS jobs_webhook_outbox AFTER UPDATE OF last_seq ON jobs
        WHEN NEW.webhook IS NOT NULL AND NEW.last_seq <> OLD.last_seq
          AND NEW.status IN (${events})
        BEGIN
          INSERT OR IGNORE INTO webhook_outbox (job_id, seq, at)
          VALUES (NEW.id, NEW.last_seq, NEW.updated_at);
        END`.execute(db);
    }
  },
};
