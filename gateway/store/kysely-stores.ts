import type { Kysely } from "kysely";
import { ping } from "../../shared/db/migrations.ts";
import type { Database } from "../../shared/db/schema.ts";
import { KyselyAgentStore } from "../agents/store.ts";
import { deliverDue, deliverOne, enqueueWebhook } from "../webhooks/deliveries.ts";
import { enableEndpoint, listEndpoints } from "../webhooks/endpoints.ts";
import { deliveryCountsByState, listDeliveries } from "../webhooks/history.ts";
import { clearOutbox, outboxDue } from "../webhooks/outbox.ts";
import { redeliver } from "../webhooks/redeliver.ts";
import {
  rotateWebhookSecret,
  signingSecrets,
  webhookSecretState,
} from "../webhooks/secret-rotation.ts";
import { apiKeyById, insertApiKey, listApiKeys, revokeApiKey } from "./api-keys.ts";
import { KyselyJobStore } from "./job-store.ts";
import type { Stores, TenantStore, UploadStore, WebhookStore } from "./ports.ts";
import { kyselyRetentionStore } from "./retention-uploads.ts";
import { tenantEvents } from "./tenant-events.ts";
import {
  ensureTenantWithKey,
  insertTenant,
  listTenants,
  tenantById,
  tenantForKey,
  updateTenantPlan,
} from "./tenants.ts";
import { insertUpload, uploadForTenant } from "./uploads.ts";

export interface KyselyStoreOptions {
  /**
   * Bound parameters one SQL statement may carry, which sizes batched inserts and updates:
   * 100 on D1 (the default), thousands on SQLite and Postgres.
   */
  maxParameters?: number;
}

/**
 * Every store port on one Kysely database (SQLite, Postgres or D1): what the entry files
 * (node.ts, worker.ts) hand the gateway core, which never sees the database itself.
 */
export function createKyselyStores(db: Kysely<Database>, options: KyselyStoreOptions = {}): Stores {
  return {
    jobs: new KyselyJobStore(db, { maxParameters: options.maxParameters ?? 100 }),
    tenants: kyselyTenantStore(db),
    uploads: kyselyUploadStore(db),
    agents: new KyselyAgentStore(db),
    webhooks: kyselyWebhookStore(db),
    events: tenantEvents(db),
    retention: kyselyRetentionStore(db),
    ping: () => ping(db),
  };
}

function kyselyTenantStore(db: Kysely<Database>): TenantStore {
  return {
    insert: (tenant) => insertTenant(db, tenant),
    byId: (id) => tenantById(db, id),
    list: (options) => listTenants(db, options),
    updatePlan: (id, change) => updateTenantPlan(db, id, change),
    ensureWithKey: (tenant, now) => ensureTenantWithKey(db, tenant, now),
    forKey: (key) => tenantForKey(db, key),
    insertKey: (input) => insertApiKey(db, input),
    listKeys: (tenantId) => listApiKeys(db, tenantId),
    keyById: (id) => apiKeyById(db, id),
    revokeKey: (id, now) => revokeApiKey(db, id, now),
  };
}

function kyselyUploadStore(db: Kysely<Database>): UploadStore {
  return {
    insert: (upload) => insertUpload(db, upload),
    forTenant: (tenantId, id) => uploadForTenant(db, tenantId, id),
  };
}

function kyselyWebhookStore(db: Kysely<Database>): WebhookStore {
  return {
    enqueue: (input, now) => enqueueWebhook(db, input, now),
    outboxDue: (before, limit) => outboxDue(db, before, limit),
    clearOutbox: (entries) => clearOutbox(db, entries),
    deliverDue: (deps) => deliverDue(db, deps),
    deliverOne: (id, deps) => deliverOne(db, id, deps),
    redeliver: (target, deps) => redeliver(db, target, deps),
    deliveries: (tenantId, jobId) => listDeliveries(db, tenantId, jobId),
    countsByState: () => deliveryCountsByState(db),
    endpoints: (tenantId) => listEndpoints(db, tenantId),
    enableEndpoint: (tenantId, url, now) => enableEndpoint(db, tenantId, url, now),
    secretState: (tenantId, now) => webhookSecretState(db, tenantId, now),
    rotateSecret: (tenantId, options) => rotateWebhookSecret(db, tenantId, options),
    signingSecrets: (tenantId, now) => signingSecrets(db, tenantId, now),
  };
}
