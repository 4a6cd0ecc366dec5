import { instant, type Migration } from "./types.ts";

/**
 * Webhook endpoint health (to disable a URL that has failed for days, and say why) and
 * rotated-out signing secrets (signed with beside the new one until their overlap ends).
 * New tables only, so every step is a plain `if not exists`.
 */
export const webhookSafety: Migration = {
  name: "0003_webhook_safety",
  async up(db, dialect) {
    const ts = instant(dialect);
    await db.schema
      .createTable("webhook_endpoints")
      .ifNotExists()
      .addColumn("tenant_id", "text", (c) => c.notNull())
      .addColumn("url", "text", (c) => c.notNull())
      .addColumn("first_failure_at", ts)
      .addColumn("last_failure_at", ts)
      .addColumn("last_success_at", ts)
      .addColumn("consecutive_failures", "integer", (c) => c.notNull().defaultTo(0))
      .addColumn("last_error", "text")
      .addColumn("disabled_at", ts)
      .addColumn("disabled_reason", "text")
      .addColumn("updated_at", ts, (c) => c.notNull())
      .addPrimaryKeyConstraint("webhook_endpoints_pk", ["tenant_id", "url"])
      .execute();
    await db.schema
      .createTable("webhook_secret_rotations")
      .ifNotExists()
      .addColumn("tenant_id", "text", (c) => c.primaryKey())
      .addColumn("previous_secret", "text", (c) => c.notNull())
      .addColumn("previous_expires_at", ts, (c) => c.notNull())
      .addColumn("rotated_at", ts, (c) => c.notNull())
      .execute();
    // The delivery log is read per job (`GET /v1/jobs/{id}/webhooks`).
    await db.schema
      .createIndex("webhook_deliveries_tenant_job")
      .ifNotExists()
      .on("webhook_deliveries")
      .columns(["tenant_id", "job_id"])
      .execute();
  },
};
