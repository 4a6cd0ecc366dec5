import type { AgentCrypto } from "../shared/agent-signing.ts";
import type { BlobRouteDeps } from "../shared/blob/local-backend.ts";
import type { BlobStore } from "../shared/blob/port.ts";
import type { JobQueue } from "../shared/queue/port.ts";
import type { QueueLeases } from "../shared/queue/sql/index.ts";
import type { Tracer } from "../shared/tracing/tracer.ts";
import type { GatewayConfig } from "./config.ts";
import type { CursorCipher, CursorTokens } from "./feed/cursor-token.ts";
import type { TenantFeed } from "./feed/tenant-feed.ts";
import type { CachedCounts } from "./limits/cached-count.ts";
import type { ModelSpec } from "./models.ts";
import type { JobNotifier } from "./notifier.ts";
import type { AgentRow } from "./store/agents.ts";
import type { Stores } from "./store/kysely-stores.ts";
import type { AuthenticatedKey, Tenant } from "./store/tenants.ts";
import type { TtlCache } from "./ttl-cache.ts";

/**
 * Reads a request's body straight from the runtime's own request object (on Node, the
 * IncomingMessage in Hono's `env`), at most `maxBytes`; null when it cannot, and the core
 * falls back to the Web Request.
 */
export type ReadRawBody = (env: unknown, maxBytes: number) => Promise<Uint8Array> | null;

/** Structured logging, satisfied by pino on Node and by a console shim on Workers. */
export interface Log {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/**
 * What the runtime hands the runtime-free gateway core: its storage, its queue, and the
 * few capabilities (clock, fetch, background work) that differ between Node and Workers.
 */
export interface GatewayRuntime {
  /** Jobs, tenants and keys, uploads, agents, webhooks: what store/kysely-stores.ts makes. */
  stores: Stores;
  queue: JobQueue;
  /**
   * With the `sql` queue: its messages leased by receipt, which the gateway serves to agents
   * that hold no queue URL (routes/agent-queue.ts). Absent with a broker.
   */
  queueLeases?: QueueLeases;
  blobs: BlobStore;
  config: GatewayConfig;
  log: Log;
  now: () => number;
  /** Outgoing requests (webhooks). */
  fetch: typeof fetch;
  /** Keeps work going after the response is sent: `ctx.waitUntil` on Workers. */
  background: (work: Promise<unknown>) => void;
  /** Reads small bodies from the runtime's own request (Node); see json-body.ts. */
  readRawBody?: ReadRawBody;
  /** Present when blobs live on this gateway's disk and its routes serve them. */
  localBlobs?: BlobRouteDeps;
  /** Hashing for agent signatures: node:crypto on Node; Web Crypto when absent (Workers). */
  agentCrypto?: AgentCrypto;
  /** The event ids' cipher (feed/cursor-token.ts): node:crypto on Node; Web Crypto when absent. */
  cursorCipher?: CursorCipher;
  /**
   * Workers: I/O that one request starts cannot be used by another, so an event stream
   * cannot share a reader with other streams or be woken by another request's change;
   * each `GET /v1/events` stream polls the store itself every `feedPollMs`.
   */
  isolatedRequests?: boolean;
  /**
   * Aborted when the process begins a graceful shutdown (Node, on SIGTERM): event streams
   * end with a reconnect hint and `Prefer: wait` answers with the job as it is.
   */
  stopping?: AbortSignal;
  /**
   * The console's built files (dist/web): a file by its URL path (`/console/assets/x.js`),
   * or null when there is none. Node reads them from disk, Workers from static assets;
   * absent, `/console` answers 404.
   */
  assets?: StaticAssets;
  /**
   * Hears how long each phase of an accepted `POST /v1/jobs` took (Node: a Prometheus
   * histogram, `gantry_gateway_submit_phase_seconds`), so its latency can be taken apart.
   */
  observeSubmit?: (phase: SubmitPhase, seconds: number) => void;
  /**
   * Spans of the job's trace (its submit, each webhook attempt): OpenTelemetry on Node when
   * OTEL_EXPORTER_OTLP_ENDPOINT is set (shared/tracing/otel-node.ts); absent, none.
   */
  tracer?: Tracer;
}

/**
 * `checks`: model, inputs and limits, up to the insert; `commit`: the insert, waiting for
 * the group commit it rides in; `publish`: the queue's confirm.
 */
export const SUBMIT_PHASES = ["checks", "commit", "publish"] as const;
export type SubmitPhase = (typeof SUBMIT_PHASES)[number];

export type StaticAssets = (path: string) => Promise<Response | null>;

/** The runtime plus what the core derives from it once. */
export interface Gateway extends GatewayRuntime {
  models: Map<string, ModelSpec>;
  notifier: JobNotifier;
  /** One reader per tenant behind `GET /v1/events` streams (feed/tenant-feed.ts). */
  feed: TenantFeed;
  /** Seals and opens the ids `GET /v1/events` sends (feed/cursor-token.ts). */
  feedCursors: CursorTokens;
  /** API keys verified lately, so each request need not hash and look its key up. */
  apiKeys: TtlCache<{ tenant: Tenant; key: AuthenticatedKey }>;
  /** Agent rows read lately by signature checks (secret, revocation, models). */
  agentRows: TtlCache<AgentRow>;
  /** Per-process readings of the counts that bound admission (see backpressure.ts). */
  admission: AdmissionCounts;
}

export interface AdmissionCounts {
  /** Ready messages per model, from the queue. */
  queueDepth: CachedCounts;
  /** Queued jobs per tenant, from the database. */
  tenantQueued: CachedCounts;
}
