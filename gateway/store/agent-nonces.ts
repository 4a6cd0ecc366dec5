import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";

/** Expired nonces are deleted at most this often per database handle. */
const PRUNE_EVERY_MS = 60_000;
const lastPruned = new WeakMap<Kysely<Database>, number>();

/**
 * Records a nonce; false when this agent already used it (a replay). The primary key on
 * (agent_id, nonce) decides, so two gateways racing on the same replay cannot both accept
 * it. Kept in the database, not in memory, so every gateway instance (Workers isolates,
 * Node replicas) sees the same nonces.
 */
export async function recordNonce(
  db: Kysely<Database>,
  entry: { agentId: string; nonce: string; expiresAt: number },
  now: number,
): Promise<boolean> {
  await pruneNonces(db, now);
  const inserted = await db
    .insertInto("agent_nonces")
    .values({ agent_id: entry.agentId, nonce: entry.nonce, expires_at: entry.expiresAt })
    .onConflict((oc) => oc.columns(["agent_id", "nonce"]).doNothing())
    .returning("nonce")
    .executeTakeFirst();
  return inserted !== undefined;
}

/**
 * Deletes nonces whose request could no longer pass the timestamp check anyway. Runs
 * inline, throttled, so no separate job is needed on Workers; the sweeper may call it too.
 */
export async function pruneNonces(db: Kysely<Database>, now: number, force = false) {
  if (!force && now - (lastPruned.get(db) ?? 0) < PRUNE_EVERY_MS) return 0;
  lastPruned.set(db, now);
  const result = await db.deleteFrom("agent_nonces").where("expires_at", "<", now).execute();
  return Number(result[0]?.numDeletedRows ?? 0);
}
