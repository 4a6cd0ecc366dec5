import type { Kysely } from "kysely";
import { ping } from "../../shared/db/migrations.ts";
import type { Database } from "../../shared/db/schema.ts";
import { KyselyAgentStore } from "./agents.ts";
import { apiKeyById, insertApiKey, listApiKeys, type NewApiKey, revokeApiKey } from "./api-keys.ts";
import { sharedSecret } from "./gateway-secrets.ts";
import { type HeldLaneRange, heldIdsInLane } from "./job-standing.ts";
import { KyselyJobStore } from "./job-store.ts";
import { snapshot } from "./release-snapshot.ts";
import { kyselyRetentionStore } from "./retention-store.ts";
import { deadRowVacuum, statisticsRefresher } from "./statistics.ts";
import { tenantEvents } from "./tenant-events.ts";
import {
  type BootstrapTenant,
  ensureTenantWithKey,
  insertTenant,
  listTenants,
  type NewTenant,
  type TenantPlanChange,
  tenantById,
  tenantForKey,
  updateTenantPlan,
} from "./tenants.ts";
import { insertUpload, type NewUpload, uploadForTenant, uploadsForTenant } from "./uploads.ts";
import { billedSince, pruneUsage, type UsageQuery, usageReport } from "./usage.ts";
import { webhookStore } from "./webhook-store.ts";

export interface KyselyStoreOptions {
  /**
   * Bound parameters one SQL statement may carry, which sizes batched inserts and updates:
   * 100 on D1 (the default), thousands on SQLite and Postgres.
   */
  maxParameters?: number;
  /**
   * Requests must not share a statement (Workers: an isolate's requests share these
   * stores, and one request's I/O may not settle another's promise): no natural batching.
   */
  isolatedRequests?: boolean;
}

/**
 * Every store the gateway holds, on one database: its type is what `createKyselyStores`
 * returns. One implementation on Kysely serves SQLite, Postgres and D1 alike, checked by one
 * conformance suite (test/conformance/stores.ts) on all three, so there is no port to
 * restate it. Routes and job logic reach the data only through these, on `gateway.stores`.
 */
export type Stores = ReturnType<typeof createKyselyStores>;

/**
 * Every store on one Kysely database (SQLite, Postgres or D1): what the entry files
 * (runtime/node, runtime/workers) hand the gateway core, which never sees the database itself.
 *
 * Every write is one statement: D1 has no interactive transactions, so the conditions in
 * the statements are what keep concurrent gateways, agents and clients from racing.
 */
export function createKyselyStores(db: Kysely<Database>, options: KyselyStoreOptions = {}) {
  return {
    /** Jobs and their event log, batches, model switches (job-store.ts). */
    jobs: new KyselyJobStore(db, {
      maxParameters: options.maxParameters ?? 100,
      isolatedRequests: options.isolatedRequests ?? false,
    }),
    /**
     * Where a held job stands in its model's fair line (gateway/jobs/queue-position.ts): the
     * line as a release pass with room `window` weighs it, and a lane's held ids.
     */
    line: {
      snapshot: (model: string, now: number, window: number) => snapshot(db, model, now, window),
      heldIdsInLane: (model: string, lane: HeldLaneRange, limit: number) =>
        heldIdsInLane(db, model, lane, limit),
    },
    tenants: tenantStore(db),
    uploads: uploadStore(db),
    /** Agents, their credentials, what they last reported, and their request nonces. */
    agents: new KyselyAgentStore(db),
    /** Webhook deliveries and attempts, endpoint health, signing secrets (webhook-store.ts). */
    webhooks: webhookStore(db),
    /** One tenant's job events in commit order, for `GET /v1/events` (tenant-events.ts). */
    events: tenantEvents(db),
    /** Retention's claims and deletes (retention-store.ts, driven by gateway/sweep/retention/). */
    retention: kyselyRetentionStore(db),
    /** Device time per tenant, key, model and hour, rolled up by the database (usage.ts). */
    usage: {
      report: (query: UsageQuery) => usageReport(db, query),
      /** A tenant's billed device time (ms) in the hours from `from` on. */
      billedSince: (tenantId: string, from: number) => billedSince(db, tenantId, from),
      /** Hours before `before`, the oldest day of them per call; returns rows deleted. */
      prune: (before: number) => pruneUsage(db, before),
    },
    /**
     * A secret every gateway on this database shares, made at random on first use
     * (gateway-secrets.ts): the seed of keys that must agree across gateways.
     */
    sharedSecret: (name: string, now: number) => sharedSecret(db, name, now),
    /** Resolves when the database answers (readiness). */
    ping: () => ping(db),
    /**
     * Analyzes the busy tables that changed much since their last analyze (Postgres; a
     * no-op elsewhere): the tables it analyzed (statistics.ts).
     */
    refreshStatistics: statisticsRefresher(db),
    /**
     * Vacuums the busy tables whose dead rows piled up (Postgres; a no-op elsewhere): the
     * tables it vacuumed (statistics.ts).
     */
    vacuumDeadRows: deadRowVacuum(db),
  };
}

/** Tenants and their API keys (stored as hashes only). */
function tenantStore(db: Kysely<Database>) {
  return {
    /** Returns null when the id is taken. */
    insert: (tenant: NewTenant) => insertTenant(db, tenant),
    byId: (id: string) => tenantById(db, id),
    /** In id order, after the cursor `after`. */
    list: (options: { limit: number; after?: string }) => listTenants(db, options),
    /** Another plan and/or other overrides (null clears them); undefined for an unknown id. */
    updatePlan: (id: string, change: TenantPlanChange) => updateTenantPlan(db, id, change),
    /** Creates the tenant if missing, puts it on its plan, and makes `apiKey` one of its keys. */
    ensureWithKey: (tenant: BootstrapTenant, now?: number) => ensureTenantWithKey(db, tenant, now),
    /** The tenant and key a bearer key belongs to; null when unknown or revoked. */
    forKey: (key: string) => tenantForKey(db, key),
    /** Returns the key (its only moment outside the client); null when a given key exists. */
    insertKey: (input: NewApiKey) => insertApiKey(db, input),
    /** Every tenant's keys when `tenantId` is absent. */
    listKeys: (tenantId?: string) => listApiKeys(db, tenantId),
    keyById: (id: string) => apiKeyById(db, id),
    /** Revoking twice keeps the first time; undefined for an unknown id. */
    revokeKey: (id: string, now: number) => revokeApiKey(db, id, now),
  };
}

/** Uploads: what a tenant said it would put at an upload's blob key. */
function uploadStore(db: Kysely<Database>) {
  return {
    insert: (upload: NewUpload) => insertUpload(db, upload),
    /** Another tenant's upload is simply not found. */
    forTenant: (tenantId: string, id: string) => uploadForTenant(db, tenantId, id),
    /** A tenant's uploads among `ids` (a batch's items'), by id, in one read. */
    forTenantMany: (tenantId: string, ids: readonly string[]) =>
      uploadsForTenant(db, tenantId, ids),
  };
}
