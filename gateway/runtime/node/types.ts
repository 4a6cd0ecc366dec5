import type { ServerType } from "@hono/node-server";
import type pino from "pino";
import type { S3BlobStoreOptions } from "../../../shared/blob/s3.ts";
import type { OpenedDatabase } from "../../../shared/db/open.ts";
import type { MetricsSource } from "../../../shared/metrics-server.ts";
import type { JobQueue } from "../../../shared/queue/port.ts";
import type { GatewayConfigInput } from "../../config.ts";
import type { Gateway } from "../../context.ts";
import type { ChangeFeedMode } from "../../feed/start-feed.ts";
import type { SweepOptions, sweep } from "../../sweep/index.ts";
import type { DispatchOptions } from "../../webhooks/dispatcher.ts";
import type { InProcessCalls } from "./direct-calls.ts";
import type { SharedLimitsOptions } from "./limits.ts";

/** What the Node entry (index.ts) takes and gives: the only gateway files, beside the Workers entry, that know their runtime. */
export interface NodeGatewayOptions {
  port: number;
  host: string;
  /** Defaults to `http://host:port` once the port is known. */
  publicUrl: string | null;
  /** `postgres://…[?schema=]`, or a SQLite path (the embedded default). */
  databaseUrl: string;
  /** `amqp://…`, `sqs://…`, `redis://…`, `nats://…`, `postgres://…`; null: the `sql` queue in the
   * same database. */
  queueUrl?: string | null;
  /** Where blobs live and what signs their URLs, unless `s3` is given. */
  blobDir: string;
  blobSecret: string;
  /**
   * GANTRY_S3_*: every blob in this bucket behind presigned S3 URLs, and no `/v1/blobs`
   * routes, so gateways on one database serve each other's uploads and artifacts.
   */
  s3?: S3BlobStoreOptions | null;
  agentToken: string;
  models: string[];
  maxUploadBytes: number;
  sweepIntervalMs: number;
  /**
   * Graceful shutdown's bound: `close()` stops accepting, lets requests in flight finish and
   * ends event streams with a reconnect hint, and cuts what is left after this long.
   * Default 10 s.
   */
  shutdownMs?: number;
  allowInsecureWebhooks: boolean;
  logger?: pino.Logger;
  /** Queue limits shared with the agents (attempts before dead-lettering, lease). */
  maxAttempts?: number;
  /** The agents' lease: a running job silent for longer (plus a grace) is requeued. */
  leaseSeconds?: number;
  /** Overrides for the sweeper's thresholds (tests shorten them). */
  sweep?: SweepOptions;
  /**
   * Webhook sending, on a loop of its own beside the sweep (webhooks/dispatcher.ts): every
   * `intervalMs` (default `sweepIntervalMs`) due deliveries start in the free slots.
   */
  webhooks?: Omit<DispatchOptions, "onError" | "onSent"> & { intervalMs?: number };
  /** Wraps the queue the gateway publishes to: tests inject faults with it. */
  wrapQueue?: (queue: JobQueue) => JobQueue;
  /**
   * `auto` (the default): on Postgres, wake streams and waiters from the database's
   * LISTEN/NOTIFY, so a change made through any gateway reaches them within milliseconds;
   * `poll`: re-read the store every `feedPollMs` instead; `redis://…`: see feed/start-feed.ts.
   */
  changeFeed?: ChangeFeedMode;
  /** Further gateway settings (queue bounds, TTLs), checked like the rest. */
  config?: Partial<GatewayConfigInput>;
  /** Rate limits shared with the other gateways (limits/start.ts, GANTRY_RATE_LIMIT_STORE). */
  sharedLimits?: SharedLimitsOptions;
  /** GANTRY_TRUSTED_PROXIES: whose X-Forwarded-For names the client (limits/client-address.ts). */
  trustedProxies?: string[];
  /**
   * GANTRY_METRICS_PORT: Prometheus `/metrics` on a listener of its own (0: any free port);
   * absent or null, none. The public port never serves them: it answers `/metrics` 404.
   */
  metricsPort?: number | null;
  /** GANTRY_METRICS_HOST: where the metrics listener binds. Default 127.0.0.1 (loopback). */
  metricsHost?: string;
}

export interface NodeGateway {
  url: string;
  gateway: Gateway;
  db: OpenedDatabase["db"];
  dialect: OpenedDatabase["dialect"];
  queue: JobQueue;
  /** Where the queue lives, without credentials. */
  queueDescription: string;
  /** Where the blobs live: `on disk in <dir>` or `in s3://bucket/prefix`. */
  blobsDescription: string;
  server: ServerType;
  /** `http://host:port/metrics` of the metrics listener; null without `metricsPort`. */
  metricsUrl: string | null;
  /**
   * Adds a source to what the metrics listener serves (the embedded agent's); null without
   * `metricsPort`. Returns how to take it off again.
   */
  addMetrics: ((source: MetricsSource) => () => void) | null;
  /** Runs one sweep now (the timer runs them every `sweepIntervalMs`). */
  sweepNow(): ReturnType<typeof sweep>;
  /** Starts the due webhook deliveries now (the dispatcher's own timer does it too). */
  sendWebhooksNow(): Promise<number>;
  /**
   * A `fetch` into this gateway's app for an agent in the same process (`gantry start`):
   * its calls run as a session's do, as that agent, with no socket, signature check or nonce.
   */
  agentFetch(agentId: string): typeof fetch;
  /**
   * The same agent's calls by path and JSON text, answered with a status and a JSON body: no
   * Request, Response or signature at all (the embedded agent's `gatewayCalls`). Null for
   * what is no call of the agent API; `agentFetch` answers those.
   */
  agentCalls(agentId: string): InProcessCalls;
  close(): Promise<void>;
}
