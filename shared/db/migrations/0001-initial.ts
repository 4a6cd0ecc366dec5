import { instant, type Migration } from "./types.ts";

/** Tenants, keys, uploads, jobs and their events, webhooks, and the `sql` queue's table. */
export const initial: Migration = {
  name: "0001_initial",
  async up(db, dialect) {
    const ts = instant(dialect);
    await db.schema
      .createTable("tenants")
      .ifNotExists()
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("webhook_secret", "text", (c) => c.notNull())
      .addColumn("created_at", ts, (c) => c.notNull())
      .execute();
    await db.schema
      .createTable("api_keys")
      .ifNotExists()
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("tenant_id", "text", (c) => c.notNull())
      .addColumn("prefix", "text", (c) => c.notNull())
      .addColumn("hash", "text", (c) => c.notNull().unique())
      .addColumn("created_at", ts, (c) => c.notNull())
      .addColumn("revoked_at", ts)
      .execute();
    await db.schema
      .createTable("uploads")
      .ifNotExists()
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("tenant_id", "text", (c) => c.notNull())
      .addColumn("content_type", "text", (c) => c.notNull())
      .addColumn("size_bytes", ts, (c) => c.notNull())
      .addColumn("blob_key", "text", (c) => c.notNull())
      .addColumn("created_at", ts, (c) => c.notNull())
      .addColumn("expires_at", ts, (c) => c.notNull())
      .execute();
    await db.schema
      .createTable("jobs")
      .ifNotExists()
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("tenant_id", "text", (c) => c.notNull())
      .addColumn("model", "text", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("priority", "integer", (c) => c.notNull())
      .addColumn("input", "text", (c) => c.notNull())
      .addColumn("output", "text")
      .addColumn("error", "text")
      .addColumn("webhook", "text")
      .addColumn("attempt", "integer", (c) => c.notNull().defaultTo(0))
      .addColumn("agent_id", "text")
      .addColumn("idempotency_key", "text")
      .addColumn("request_hash", "text")
      .addColumn("traceparent", "text")
      .addColumn("created_at", ts, (c) => c.notNull())
      .addColumn("updated_at", ts, (c) => c.notNull())
      .addColumn("started_at", ts)
      .addColumn("finished_at", ts)
      .addColumn("expires_at", ts, (c) => c.notNull())
      .addColumn("published_at", ts)
      .addColumn("last_seq", "integer", (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .createIndex("jobs_tenant_idempotency")
      .ifNotExists()
      .on("jobs")
      .columns(["tenant_id", "idempotency_key"])
      .unique()
      .execute();
    await db.schema
      .createIndex("jobs_tenant_id")
      .ifNotExists()
      .on("jobs")
      .columns(["tenant_id", "id"])
      .execute();
    await db.schema
      .createIndex("jobs_status_expires")
      .ifNotExists()
      .on("jobs")
      .columns(["status", "expires_at"])
      .execute();
    await db.schema
      .createTable("job_events")
      .ifNotExists()
      .addColumn("job_id", "text", (c) => c.notNull())
      .addColumn("seq", "integer", (c) => c.notNull())
      .addColumn("status", "text", (c) => c.notNull())
      .addColumn("attempt", "integer", (c) => c.notNull())
      .addColumn("error", "text")
      .addColumn("at", ts, (c) => c.notNull())
      .addPrimaryKeyConstraint("job_events_pk", ["job_id", "seq"])
      .execute();
    await db.schema
      .createTable("webhook_deliveries")
      .ifNotExists()
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("tenant_id", "text", (c) => c.notNull())
      .addColumn("job_id", "text", (c) => c.notNull())
      .addColumn("event_type", "text", (c) => c.notNull())
      .addColumn("url", "text", (c) => c.notNull())
      .addColumn("payload", "text", (c) => c.notNull())
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("attempts", "integer", (c) => c.notNull().defaultTo(0))
      .addColumn("next_attempt_at", ts)
      .addColumn("created_at", ts, (c) => c.notNull())
      .addColumn("updated_at", ts, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("webhook_deliveries_due")
      .ifNotExists()
      .on("webhook_deliveries")
      .columns(["state", "next_attempt_at"])
      .execute();
    await db.schema
      .createTable("webhook_attempts")
      .ifNotExists()
      .addColumn("delivery_id", "text", (c) => c.notNull())
      .addColumn("n", "integer", (c) => c.notNull())
      .addColumn("at", ts, (c) => c.notNull())
      .addColumn("status_code", "integer")
      .addColumn("error", "text")
      .addColumn("duration_ms", "integer", (c) => c.notNull())
      .addPrimaryKeyConstraint("webhook_attempts_pk", ["delivery_id", "n"])
      .execute();
    await db.schema
      .createTable("queue_messages")
      .ifNotExists()
      .addColumn("seq", dialect === "postgres" ? "bigserial" : "integer", (c) =>
        dialect === "postgres" ? c.primaryKey() : c.primaryKey().autoIncrement(),
      )
      .addColumn("queue", "text", (c) => c.notNull())
      .addColumn("job_id", "text", (c) => c.notNull())
      .addColumn("body", "text", (c) => c.notNull())
      .addColumn("priority", "integer", (c) => c.notNull())
      .addColumn("available_at", ts, (c) => c.notNull())
      .addColumn("attempts", "integer", (c) => c.notNull().defaultTo(0))
      .addColumn("lease_token", "text")
      .addColumn("lease_expires_at", ts)
      .addColumn("state", "text", (c) => c.notNull())
      .addColumn("error", "text")
      .addColumn("created_at", ts, (c) => c.notNull())
      .execute();
    await db.schema
      .createIndex("queue_messages_claim")
      .ifNotExists()
      .on("queue_messages")
      .columns(["queue", "state", "priority", "seq"])
      .execute();
  },
};
