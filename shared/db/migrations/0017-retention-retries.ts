import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import type { Migration } from "./types.ts";

/**
 * Retention retries with backoff: how many times in a row retention failed
 * to settle a job or an upload. A row that fails is given back with `purge_until` (its lease
 * column, migration 0013) set to when it may be tried again, a delay that doubles with each
 * failure, so a claim (`purge_until < now`) passes over it to the rows behind it until then.
 * A stage that settles the row sets the count back to 0.
 *
 * `integer not null default 0`: existing rows read 0, and on Postgres 11+ a constant default
 * is recorded in the catalogue without rewriting the table. In no index, so the updates that
 * change it stay HOT on Postgres, as the lease columns' do.
 */
export const retentionRetries: Migration = {
  name: "0017_retention_retries",
  async up(db, dialect) {
    const count = sql`integer not null default 0`;
    await addColumn(db, dialect, "jobs", "purge_failures", count);
    await addColumn(db, dialect, "uploads", "purge_failures", count);
  },
};
