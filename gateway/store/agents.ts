import type { Kysely, Selectable } from "kysely";
import type { AgentTable, Database } from "../../shared/db/schema.ts";
import { newId, randomToken } from "../../shared/ids.ts";
import type { AgentHeartbeatRequest, AgentRegisterRequest } from "../../shared/protocol/index.ts";
import { pruneNonces, recordNonce } from "./agent-nonces.ts";

/** An agent as stored. */
export type AgentRow = Selectable<AgentTable>;
export type AgentSource = "admin" | "enrollment";

/** What an agent's heartbeats say about it; every field optional. */
export type AgentStatusReport = Partial<
  Pick<
    AgentHeartbeatRequest,
    "slots_busy" | "run_time_ms_avg" | "vram_used_mb" | "provider" | "devices" | "loaded_models"
  >
> & { state?: AgentHeartbeatRequest["state"] };

/** `gas_` and 32 random bytes: what an agent signs its requests with. */
export function newAgentSecret(): string {
  return `gas_${randomToken(32)}`;
}

/**
 * Agents on Kysely (SQLite, Postgres, D1): their credentials, what they last reported, and
 * their request nonces (agent-nonces.ts). Every write is one statement, as D1 has no
 * interactive transactions.
 */
export class KyselyAgentStore {
  constructor(private readonly db: Kysely<Database>) {}

  /** Makes an agent with a fresh secret; the caller hands the secret out once. */
  async create(options: { name?: string | undefined; source: AgentSource; now: number }) {
    const id = newId("agt", options.now);
    const secret = newAgentSecret();
    const row = await this.db
      .insertInto("agents")
      .values({
        id,
        name: options.name ?? id,
        secret,
        source: options.source,
        created_at: options.now,
        revoked_at: null,
        models: null,
        provider: null,
        slots: null,
        vram_total_mb: null,
        heartbeat_interval_ms: null,
        registered_at: null,
        last_heartbeat_at: null,
        slots_busy: null,
        run_time_ms_avg: null,
        vram_used_mb: null,
        reported_state: null,
        devices: null,
        loaded_models: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { row, secret };
  }

  byId(id: string): Promise<AgentRow | undefined> {
    return this.db.selectFrom("agents").selectAll().where("id", "=", id).executeTakeFirst();
  }

  /** Newest first; ids sort by creation time, so the last id is the cursor. */
  list(options: { limit: number; before?: string | undefined }): Promise<AgentRow[]> {
    let query = this.db.selectFrom("agents").selectAll().orderBy("id", "desc").limit(options.limit);
    if (options.before) query = query.where("id", "<", options.before);
    return query.execute();
  }

  /**
   * Agents heard from, the latest first (a registration counts as a heartbeat): what the
   * fleet readings count. Not by id, since every start of an enrolled agent makes a new row
   * (Kubernetes pods, restarts): the newest ids had left out a live agent that enrolled
   * before 500 others.
   */
  heardFrom(limit: number): Promise<AgentRow[]> {
    return this.db
      .selectFrom("agents")
      .selectAll()
      .where("last_heartbeat_at", "is not", null)
      .orderBy("last_heartbeat_at", "desc")
      .limit(limit)
      .execute();
  }

  /** What the agent serves now; a registration also counts as a heartbeat. */
  register(
    id: string,
    registration: AgentRegisterRequest,
    now: number,
  ): Promise<AgentRow | undefined> {
    return this.db
      .updateTable("agents")
      .set({
        models: JSON.stringify(registration.models),
        provider: registration.provider,
        slots: registration.slots,
        prefetch: registration.prefetch ?? null,
        vram_total_mb: registration.vram_total_mb ?? null,
        heartbeat_interval_ms:
          registration.heartbeat_interval_seconds === undefined
            ? null
            : Math.round(registration.heartbeat_interval_seconds * 1000),
        registered_at: now,
        last_heartbeat_at: now,
        reported_state: "running",
      })
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst();
  }

  /** Records a heartbeat; fields the agent left out keep their last value. */
  async heartbeat(id: string, report: AgentStatusReport, now: number): Promise<void> {
    await this.db
      .updateTable("agents")
      .set({
        last_heartbeat_at: now,
        ...(report.slots_busy === undefined ? {} : { slots_busy: report.slots_busy }),
        ...(report.run_time_ms_avg === undefined
          ? {}
          : { run_time_ms_avg: Math.round(report.run_time_ms_avg) }),
        ...(report.vram_used_mb === undefined ? {} : { vram_used_mb: report.vram_used_mb }),
        ...(report.provider === undefined ? {} : { provider: report.provider }),
        ...(report.state === undefined ? {} : { reported_state: report.state }),
        ...(report.devices === undefined ? {} : { devices: JSON.stringify(report.devices) }),
        ...(report.loaded_models === undefined
          ? {}
          : { loaded_models: JSON.stringify(report.loaded_models) }),
      })
      .where("id", "=", id)
      .execute();
  }

  /** Revokes at once; revoking twice keeps the first time. Undefined for an unknown id. */
  async revoke(id: string, now: number): Promise<AgentRow | undefined> {
    const revoked = await this.db
      .updateTable("agents")
      .set({ revoked_at: now })
      .where("id", "=", id)
      .where("revoked_at", "is", null)
      .returningAll()
      .executeTakeFirst();
    return revoked ?? this.byId(id);
  }

  /** Jobs the gateway has as running on each of these agents (agents with none are absent). */
  async runningJobs(agentIds: string[]): Promise<Map<string, number>> {
    if (agentIds.length === 0) return new Map();
    const rows = await this.db
      .selectFrom("jobs")
      .select(["agent_id", (eb) => eb.fn.countAll<number | string>().as("running")])
      .where("status", "=", "running")
      .where("agent_id", "in", agentIds)
      .groupBy("agent_id")
      .execute();
    return new Map(rows.map((row) => [row.agent_id ?? "", Number(row.running)]));
  }

  /**
   * Queued jobs per model, from the job store: how many wait, for a reader without the
   * queue at hand (the CLI). Includes jobs waiting out a retry delay; models with none are
   * absent.
   */
  async queuedJobsByModel(): Promise<Map<string, number>> {
    const rows = await this.db
      .selectFrom("jobs")
      .select(["model", (eb) => eb.fn.countAll<number | string>().as("queued")])
      .where("status", "=", "queued")
      .groupBy("model")
      .execute();
    return new Map(rows.map((row) => [row.model, Number(row.queued)]));
  }

  /** False when this agent already used this nonce (a replay). */
  recordNonce(
    entry: { agentId: string; nonce: string; expiresAt: number },
    now: number,
  ): Promise<boolean> {
    return recordNonce(this.db, entry, now);
  }

  /** Deletes expired nonces (throttled unless `force`); returns how many. */
  pruneNonces(now: number, force = false): Promise<number> {
    return pruneNonces(this.db, now, force);
  }
}
