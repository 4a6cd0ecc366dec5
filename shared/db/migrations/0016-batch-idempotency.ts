import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import type { Migration } from "./types.ts";

/**
 * `Idempotency-Key` on `POST /v1/batches`: the key and the hash of the request it came with,
 * unique per tenant, so a client that lost the answer may send the same batch again and get
 * the batch it made, never a second one. Null on batches made without a key (and before).
 */
export const batchIdempotency: Migration = {
  name: "0016_batch_idempotency",
  async up(db, dialect) {
    await addColumn(db, dialect, "batches", "idempotency_key", sql`text`);
    await addColumn(db, dialect, "batches", "request_hash", sql`text`);
    // Not partial: NULL keys never collide in a unique index (SQLite and Postgres alike), and
    // a plain index is what `ON CONFLICT (tenant_id, idempotency_key)` can name.
    await db.schema
      .createIndex("batches_tenant_idempotency")
      .ifNotExists()
      .unique()
      .on("batches")
      .columns(["tenant_id", "idempotency_key"])
      .execute();
  },
};
