import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import { instant, type Migration } from "./types.ts";

/**
 * Retention (gateway/retention/): what the sweeper has already deleted of a job or an
 * upload, and a short lease so that several gateways sweeping at once never work on the
 * same rows (on Postgres the claim also skips rows another claim holds locked).
 *
 * The indexes are partial, each holding only the rows one pass still has to visit, so a
 * pass reads the oldest due rows by index however many jobs were ever kept. None of them
 * covers the lease columns: a claim changes only those, which leaves Postgres free to make
 * it a HOT update.
 */
export const retention: Migration = {
  name: "0013_retention",
  async up(db, dialect) {
    const ts = sql.raw(instant(dialect));
    await addColumn(db, dialect, "jobs", "inputs_purged_at", ts);
    await addColumn(db, dialect, "jobs", "data_expired_at", ts);
    await addColumn(db, dialect, "jobs", "purge_token", sql`text`);
    await addColumn(db, dialect, "jobs", "purge_until", ts);
    await addColumn(db, dialect, "uploads", "used_at", ts);
    await addColumn(db, dialect, "uploads", "purge_token", sql`text`);
    await addColumn(db, dialect, "uploads", "purge_until", ts);
    // Ended jobs whose input names an upload not yet deleted.
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_retention_inputs ON jobs (finished_at)
      WHERE finished_at IS NOT NULL AND inputs_purged_at IS NULL AND input LIKE '%"upl_%'`.execute(
      db,
    );
    // Ended jobs whose output and artifacts are still kept.
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_retention_outputs ON jobs (finished_at)
      WHERE finished_at IS NOT NULL AND data_expired_at IS NULL`.execute(db);
    // Jobs whose data is gone: what is left is the row, its events and webhook records.
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_retention_rows ON jobs (finished_at)
      WHERE data_expired_at IS NOT NULL`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS uploads_unused ON uploads (created_at)
      WHERE used_at IS NULL`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS uploads_tenant ON uploads (tenant_id, created_at)`.execute(db);
  },
};
