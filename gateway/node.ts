import { setMaxListeners } from "node:events";
import { type ServerType, serve } from "@hono/node-server";
import type { Kysely } from "kysely";
import pino from "pino";
import { nodeAgentCrypto } from "../shared/agent-signing-node.ts";
import { createDiskBlobStore } from "../shared/blob/disk.ts";
import { type OpenedDatabase, openDatabase } from "../shared/db/open.ts";
import type { Database } from "../shared/db/schema.ts";
import { UserError } from "../shared/errors.ts";
import { allowListOf } from "../shared/net/allow-list.ts";
import { createSafeWebhookFetch } from "../shared/net/safe-fetch.ts";
import { type OpenedQueue, openQueue, sqlQueueOn } from "../shared/queue/open.ts";
import type { JobQueue, QueueLimits } from "../shared/queue/port.ts";
import { createApp, createGateway } from "./app.ts";
import { GatewayConfig, type GatewayConfigInput } from "./config.ts";
import type { Gateway } from "./context.ts";
import { type ChangeFeedMode, startChangeFeed } from "./feed/start-feed.ts";
import { limitAnonymousByAddress } from "./limits/address-limit.ts";
import { nodeAddressOf } from "./limits/client-address.ts";
import { type SharedLimitsOptions, startSharedLimits } from "./limits/start.ts";
import { createGatewayMetrics, submitPhases } from "./metrics-node.ts";
import { diskAssets } from "./node-assets.ts";
import { readIncomingBody } from "./node-body.ts";
import { createKyselyStores } from "./store/kysely-stores.ts";
import { type SweepOptions, sweep } from "./sweep.ts";

/** The Node entry: the only gateway file, beside `worker.ts`, that knows its runtime. */
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
  blobDir: string;
  blobSecret: string;
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
}

export interface NodeGateway {
  url: string;
  gateway: Gateway;
  db: Kysely<Database>;
  dialect: OpenedDatabase["dialect"];
  queue: JobQueue;
  /** Where the queue lives, without credentials. */
  queueDescription: string;
  server: ServerType;
  /** Runs one sweep now (the timer runs them every `sweepIntervalMs`). */
  sweepNow(): ReturnType<typeof sweep>;
  close(): Promise<void>;
}

export async function startNodeGateway(options: NodeGatewayOptions): Promise<NodeGateway> {
  const log = options.logger ?? pino({ name: "gantry-gateway" });
  // Checked before anything starts: a bad entry fails the start with its setting's name.
  const addressOf = nodeAddressOf(options.trustedProxies ?? []);
  const database = await openDatabase(options.databaseUrl);
  const db = database.db;
  const opened = await openGatewayQueue(database, options, log).catch(async (error) => {
    await database.close();
    throw error;
  });
  const queue = options.wrapQueue ? options.wrapQueue(opened.queue) : opened.queue;
  const pending = new Set<Promise<unknown>>();
  const background = (work: Promise<unknown>) => {
    const tracked = work.catch((error) =>
      log.error({ err: String(error) }, "background work failed"),
    );
    pending.add(tracked);
    void tracked.finally(() => pending.delete(tracked));
  };

  // The public URL may depend on the port the OS picks, so listen first, then build.
  let app: ReturnType<typeof createApp> | null = null;
  let metrics: ReturnType<typeof createGatewayMetrics> | null = null;
  const stopping = new AbortController();
  // Every open event stream and wait listens for the shutdown: thousands are expected.
  setMaxListeners(0, stopping.signal);
  let inFlight = 0;
  const server = serve({
    port: options.port,
    hostname: options.host,
    fetch: async (request, env) => {
      // Prometheus scrapes the Node gateway; the runtime-free app knows nothing of it.
      if (metrics && new URL(request.url).pathname === "/metrics") return metrics.handler();
      if (!app) return new Response("starting", { status: 503 });
      inFlight++;
      try {
        // `env` carries the IncomingMessage, which readIncomingBody reads JSON bodies from.
        return await app.fetch(request, env);
      } finally {
        inFlight--;
      }
    },
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("listening", resolve);
      server.once("error", reject);
    });
  } catch (error) {
    // Port taken: release the database and queue so the process can exit with the error.
    await opened.close().catch(() => {});
    await database.close().catch(() => {});
    // A taken or forbidden port is the operator's to fix: one line naming PORT, no stack.
    const code = (error as { code?: unknown }).code;
    if (code === "EADDRINUSE" || code === "EACCES" || code === "EADDRNOTAVAIL") {
      throw new UserError(
        `cannot listen on ${options.host}:${options.port} (${code}): set PORT or GANTRY_HOST`,
      );
    }
    throw error;
  }
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  const url = options.publicUrl ?? `http://${options.host}:${port}`;

  const blobs = createDiskBlobStore({
    root: options.blobDir,
    publicBaseUrl: url,
    secret: options.blobSecret,
  });
  const config = GatewayConfig.parse({
    ...options.config,
    publicUrl: url,
    models: options.models,
    maxUploadBytes: options.maxUploadBytes,
    agentToken: options.agentToken,
    allowInsecureWebhooks: options.allowInsecureWebhooks,
    // Whole seconds in the claim; the sweeper and the queue use the exact lease.
    ...(options.leaseSeconds ? { leaseSeconds: Math.ceil(options.leaseSeconds) } : {}),
  });
  const phases = submitPhases();
  const gateway = createGateway({
    stopping: stopping.signal,
    observeSubmit: phases.observe,
    // SQLite's bound is 32766 and Postgres's 65535: batches of a few hundred jobs.
    stores: createKyselyStores(db, { maxParameters: 10_000 }),
    queue,
    blobs,
    config,
    log,
    now: Date.now,
    // Webhooks: the connect-time check refuses internal addresses, whatever DNS says.
    // Embedded mode allows loopback and private receivers (metadata stays refused).
    // GANTRY_WEBHOOK_ALLOW lets the operator's listed receivers through, here as at submission.
    fetch: createSafeWebhookFetch({
      allowPrivate: options.allowInsecureWebhooks,
      allow: allowListOf(config.webhookAllow),
    }),
    background,
    localBlobs: { backend: blobs, secret: options.blobSecret },
    agentCrypto: nodeAgentCrypto,
    readRawBody: readIncomingBody,
    assets: diskAssets(),
  });
  app = createApp(gateway);
  const listener = await startChangeFeed(
    gateway.notifier,
    { dialect: database.dialect, url: options.databaseUrl },
    options.changeFeed,
    log,
  );
  metrics = createGatewayMetrics(gateway, [phases.metric]);
  limitAnonymousByAddress(gateway, addressOf);
  const sharedLimits = await startSharedLimits(gateway, db, database.dialect, {
    ...options.sharedLimits,
  });

  const sweepOptions: SweepOptions = {
    ...(options.maxAttempts ? { maxAttempts: options.maxAttempts } : {}),
    ...options.sweep,
  };
  let sweeping: Promise<unknown> | null = null;
  const timer = setInterval(() => {
    sweeping ??= sweep(gateway, sweepOptions)
      .then((report) => {
        if (report.republished || report.released || report.abandoned || report.expired)
          log.info(report, "sweep changed jobs");
        const removed = report.retention;
        if (removed && (removed.failures || Object.values(removed.rows).some((n) => n > 0)))
          log.info({ retention: removed }, "retention deleted data");
      })
      .catch((error) => log.error({ err: String(error) }, "sweep failed"))
      .finally(() => {
        sweeping = null;
      });
  }, options.sweepIntervalMs);
  timer.unref();

  return {
    url,
    gateway,
    db,
    dialect: database.dialect,
    queue,
    queueDescription: opened.description,
    server,
    sweepNow: () => sweep(gateway, sweepOptions),
    async close() {
      clearInterval(timer);
      await listener.close();
      await sharedLimits?.close();
      await drain(server, stopping, () => inFlight, options.shutdownMs ?? 10_000);
      await Promise.allSettled([...pending, sweeping]);
      await opened.close();
      await database.close();
    },
  };
}

/** The queue `queueUrl` names, or the embedded default: the `sql` queue in this database. */
async function openGatewayQueue(
  database: OpenedDatabase,
  options: NodeGatewayOptions,
  log: pino.Logger,
): Promise<OpenedQueue> {
  const limits: Partial<QueueLimits> = {
    maxAttempts: options.maxAttempts ?? 5,
    ...(options.leaseSeconds ? { leaseMs: options.leaseSeconds * 1000 } : {}),
  };
  if (options.queueUrl) return openQueue(options.queueUrl, { limits, logger: log });
  const queue = sqlQueueOn(database, { limits, logger: log });
  return {
    queue,
    description: `sql queue in ${database.description}`,
    close: () => queue.close(),
  };
}

/**
 * Graceful shutdown: stop accepting, end event streams and waits (they reconnect or retry
 * elsewhere), let the requests in flight finish, close idle keep-alive connections as they
 * free up, and cut whatever is still open after `boundMs`.
 */
async function drain(
  server: ServerType,
  stopping: AbortController,
  inFlight: () => number,
  boundMs: number,
): Promise<void> {
  let closed = false;
  const allClosed = new Promise<void>((resolve) => server.close(() => resolve())).then(() => {
    closed = true;
  });
  stopping.abort();
  const http = server as Partial<
    Pick<import("node:http").Server, "closeIdleConnections" | "closeAllConnections">
  >;
  const deadline = Date.now() + boundMs;
  // A connection is idle once its response has ended: requests finishing and streams
  // ending themselves free theirs one by one.
  while (!closed && Date.now() < deadline) {
    http.closeIdleConnections?.();
    await new Promise((resolve) => setTimeout(resolve, inFlight() > 0 ? 20 : 5));
  }
  if (!closed) http.closeAllConnections?.();
  await allClosed;
}
