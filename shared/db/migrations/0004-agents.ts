import { instant, type Migration } from "./types.ts";

/**
 * Agents with their own secrets, what they registered and last reported, and the nonces
 * of their signed requests (the replay guard). New tables only: plain `if not exists`.
 */
export const agents: Migration = {
  name: "0004_agents",
  async up(db, dialect) {
    const ts = instant(dialect);
    await db.schema
      .createTable("agents")
      .ifNotExists()
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("secret", "text", (c) => c.notNull())
      .addColumn("source", "text", (c) => c.notNull())
      .addColumn("created_at", ts, (c) => c.notNull())
      .addColumn("revoked_at", ts)
      .addColumn("models", "text")
      .addColumn("provider", "text")
      .addColumn("slots", "integer")
      .addColumn("vram_total_mb", "integer")
      .addColumn("heartbeat_interval_ms", "integer")
      .addColumn("registered_at", ts)
      .addColumn("last_heartbeat_at", ts)
      .addColumn("slots_busy", "integer")
      .addColumn("run_time_ms_avg", "integer")
      .addColumn("vram_used_mb", "integer")
      .addColumn("reported_state", "text")
      .execute();
    await db.schema
      .createTable("agent_nonces")
      .ifNotExists()
      .addColumn("agent_id", "text", (c) => c.notNull())
      .addColumn("nonce", "text", (c) => c.notNull())
      .addColumn("expires_at", ts, (c) => c.notNull())
      .addPrimaryKeyConstraint("agent_nonces_pk", ["agent_id", "nonce"])
      .execute();
    await db.schema
      .createIndex("agent_nonces_expires")
      .ifNotExists()
      .on("agent_nonces")
      .column("expires_at")
      .execute();
  },
};
