import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import { instant, type Migration } from "./types.ts";

/**
 * Batches (`POST /v1/batches`): one row per batch, and on each of its jobs the batch's id.
 * A batch's counts are read from its jobs (`jobs_batch`), never kept apart, so they cannot
 * drift from the truth. `total` stays null until every item is inserted: only a sealed
 * batch can complete.
 */
export const batches: Migration = {
  name: "0012_batches",
  async up(db, dialect) {
    const ts = instant(dialect);
    await db.schema
      .createTable("batches")
      .ifNotExists()
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("tenant_id", "text", (c) => c.notNull())
      .addColumn("model", "text", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("total", "integer")
      .addColumn("webhook", "text")
      .addColumn("metadata", "text")
      .addColumn("created_at", ts, (c) => c.notNull())
      .addColumn("updated_at", ts, (c) => c.notNull())
      .addColumn("completed_at", ts)
      .addColumn("canceled_at", ts)
      .execute();
    await db.schema
      .createIndex("batches_tenant")
      .ifNotExists()
      .on("batches")
      .columns(["tenant_id", "id"])
      .execute();
    await addColumn(db, dialect, "jobs", "batch_id", sql`text`);
    await sql`CREATE INDEX IF NOT EXISTS jobs_batch ON jobs (batch_id, id)
      WHERE batch_id IS NOT NULL`.execute(db);
  },
};
