import type { AgentRegisterRequest } from "../../shared/protocol/index.ts";
import type { AgentRow, AgentSource, AgentStatusReport } from "../agents/rows.ts";
import type { DeliverDeps } from "../webhooks/attempt.ts";
import type { DeliverySummary, EnqueueWebhookInput } from "../webhooks/deliveries.ts";
import type { EndpointView } from "../webhooks/endpoints.ts";
import type { WebhookDeliveryView } from "../webhooks/history.ts";
import type { OutboxEntry } from "../webhooks/outbox.ts";
import type { RedeliverResult } from "../webhooks/redeliver.ts";
import type { WebhookSecretState } from "../webhooks/secret-rotation.ts";
import type { ApiKeyRow, NewApiKey } from "./api-keys.ts";
import type { JobStore } from "./job-port.ts";
import type { RetentionStore } from "./retention-port.ts";
import type { TenantEvents } from "./tenant-events.ts";
import type {
  AuthenticatedKey,
  BootstrapTenant,
  NewTenant,
  Tenant,
  TenantPlanChange,
  TenantRow,
} from "./tenants.ts";
import type { NewUpload, UploadRow } from "./uploads.ts";

/**
 * The gateway's storage ports: what the runtime-free core asks of its database. One
 * implementation, on Kysely (SQLite, Postgres, D1: see kysely-stores.ts), checked by one
 * conformance suite (test/conformance/stores.ts) on all three. Routes and job logic reach
 * the data only through these, on `gateway.stores`.
 *
 * Every write is one statement: D1 has no interactive transactions, so the conditions in
 * the statements are what keep concurrent gateways, agents and clients from racing.
 */

export type { JobListOptions, JobStore, Transition } from "./job-port.ts";
export type { RetentionStore } from "./retention-port.ts";

/** Tenants and their API keys (stored as hashes only). */
export interface TenantStore {
  /** Returns null when the id is taken. */
  insert(tenant: NewTenant): Promise<TenantRow | null>;
  byId(id: string): Promise<TenantRow | undefined>;
  /** In id order, after the cursor `after`. */
  list(options: { limit: number; after?: string }): Promise<TenantRow[]>;
  /** Another plan and/or other overrides (null clears them); undefined for an unknown id. */
  updatePlan(id: string, change: TenantPlanChange): Promise<TenantRow | undefined>;
  /** Creates the tenant if missing, puts it on its plan, and makes `apiKey` one of its keys. */
  ensureWithKey(tenant: BootstrapTenant, now?: number): Promise<void>;
  /** The tenant and key a bearer key belongs to; null when unknown or revoked. */
  forKey(key: string): Promise<{ tenant: Tenant; key: AuthenticatedKey } | null>;
  /** Returns the key (its only moment outside the client); null when a given key exists. */
  insertKey(input: NewApiKey): Promise<{ key: string; row: ApiKeyRow } | null>;
  /** Every tenant's keys when `tenantId` is absent. */
  listKeys(tenantId?: string): Promise<ApiKeyRow[]>;
  keyById(id: string): Promise<ApiKeyRow | undefined>;
  /** Revoking twice keeps the first time; undefined for an unknown id. */
  revokeKey(id: string, now: number): Promise<ApiKeyRow | undefined>;
}

/** Uploads: what a tenant said it would put at an upload's blob key. */
export interface UploadStore {
  insert(upload: NewUpload): Promise<void>;
  /** Another tenant's upload is simply not found. */
  forTenant(tenantId: string, id: string): Promise<UploadRow | undefined>;
}

/** Agents, their credentials, what they last reported, and their request nonces. */
export interface AgentStore {
  /** Makes an agent with a fresh secret; the caller hands the secret out once. */
  create(options: {
    name?: string | undefined;
    source: AgentSource;
    now: number;
  }): Promise<{ row: AgentRow; secret: string }>;
  byId(id: string): Promise<AgentRow | undefined>;
  /** Newest first; `before` is the last id of the previous page. */
  list(options: { limit: number; before?: string | undefined }): Promise<AgentRow[]>;
  /** What the agent serves now; also counts as a heartbeat. Undefined for an unknown id. */
  register(
    id: string,
    registration: AgentRegisterRequest,
    now: number,
  ): Promise<AgentRow | undefined>;
  /** Fields the agent left out keep their last value. */
  heartbeat(id: string, report: AgentStatusReport, now: number): Promise<void>;
  /** Revoking twice keeps the first time; undefined for an unknown id. */
  revoke(id: string, now: number): Promise<AgentRow | undefined>;
  /** Jobs running on each of these agents (agents with none are absent). */
  runningJobs(agentIds: string[]): Promise<Map<string, number>>;
  /** Queued jobs per model (models with none are absent). */
  queuedJobsByModel(): Promise<Map<string, number>>;
  /** False when this agent already used this nonce (a replay). */
  recordNonce(
    entry: { agentId: string; nonce: string; expiresAt: number },
    now: number,
  ): Promise<boolean>;
  /** Deletes expired nonces (throttled unless `force`); returns how many. */
  pruneNonces(now: number, force?: boolean): Promise<number>;
}

/**
 * Webhook deliveries, their attempts, endpoint health and the tenants' signing secrets.
 * Sending is runtime-free: `deps` carries the fetch, clock and secrets.
 */
export interface WebhookStore {
  /** Records an event to deliver, due at once; returns the delivery id (one per `eventSeq`). */
  enqueue(input: EnqueueWebhookInput, now: number): Promise<string>;
  /** Webhook events recorded before `before` not yet seen by the sweeper (outbox.ts). */
  outboxDue(before: number, limit: number): Promise<OutboxEntry[]>;
  clearOutbox(entries: readonly { jobId: string; seq: number }[]): Promise<void>;
  /** Sends every pending delivery that is due (up to `deps.limit`). */
  deliverDue(deps: DeliverDeps): Promise<DeliverySummary>;
  /** Sends this delivery now if it is pending and due. */
  deliverOne(deliveryId: string, deps: DeliverDeps): Promise<DeliverySummary>;
  /** One more attempt now, whatever the delivery's state (see redeliver.ts). */
  redeliver(
    target: { tenantId: string; jobId: string; deliveryId: string },
    deps: DeliverDeps,
  ): Promise<RedeliverResult>;
  /** One job's deliveries with their attempts, oldest first. */
  deliveries(tenantId: string, jobId: string): Promise<WebhookDeliveryView[]>;
  /** Deliveries per state, every tenant together (the metrics). */
  countsByState(): Promise<Map<string, number>>;
  endpoints(tenantId: string): Promise<EndpointView[]>;
  /** Clears a disabled endpoint; null if the URL is unknown. */
  enableEndpoint(tenantId: string, url: string, now: number): Promise<EndpointView | null>;
  /** Null for an unknown tenant. */
  secretState(tenantId: string, now: number): Promise<WebhookSecretState | null>;
  rotateSecret(
    tenantId: string,
    options: { now: number; overlapMs?: number },
  ): Promise<WebhookSecretState>;
  /** The current secret, then the rotated-out one during its overlap. */
  signingSecrets(tenantId: string, now: number): Promise<string[]>;
}

/** Every store the gateway holds, on one database. */
export interface Stores {
  jobs: JobStore;
  tenants: TenantStore;
  uploads: UploadStore;
  agents: AgentStore;
  webhooks: WebhookStore;
  /** One tenant's job events in commit order, for `GET /v1/events` (tenant-events.ts). */
  events: TenantEvents;
  /** Retention's claims and deletes (retention-port.ts, driven by gateway/retention/). */
  retention: RetentionStore;
  /** Resolves when the database answers (readiness). */
  ping(): Promise<void>;
}
