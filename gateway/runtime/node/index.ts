import { setMaxListeners } from "node:events";
import { serve } from "@hono/node-server";
import pino from "pino";
import { nodeAgentCrypto } from "../../../shared/agent-signing-node.ts";
import { routeAwsSdkNodeWarning } from "../../../shared/aws-sdk-node-warning.ts";
import { type OpenedDatabase, openDatabase } from "../../../shared/db/open.ts";
import { UserError } from "../../../shared/errors.ts";
import { allowListOf } from "../../../shared/net/allow-list.ts";
import { listenRefusalCode } from "../../../shared/net/network-errors.ts";
import { createSafeWebhookFetch } from "../../../shared/net/safe-fetch.ts";
import { type OpenedQueue, openQueue, sqlQueueOn } from "../../../shared/queue/open/index.ts";
import type { QueueLimits } from "../../../shared/queue/port.ts";
import { startTracing } from "../../../shared/tracing/otel-node.ts";
import { createApp, createGateway } from "../../app.ts";
import { GatewayConfig } from "../../config.ts";
import { feedSettings, startChangeFeed } from "../../feed/start-feed.ts";
import { webhookDeps } from "../../jobs/lifecycle.ts";
import { limitAnonymousByAddress } from "../../limits/address-limit.ts";
import { createKyselyStores } from "../../store/kysely-stores.ts";
import { type SweepOptions, sweep } from "../../sweep/index.ts";
import { createWebhookDispatcher } from "../../webhooks/dispatcher.ts";
import { diskAssets } from "./assets.ts";
import { checkS3Credentials, nodeBlobs, warnOfSharedDiskBlobs } from "./blobs.ts";
import { readIncomingBody } from "./body.ts";
import { nodeAddressOf } from "./client-address.ts";
import { answerClientErrors } from "./client-errors.ts";
import { nodeCursorCipher } from "./cursor-cipher.ts";
import { drain } from "./drain.ts";
import { startSharedLimits } from "./limits.ts";
import { createGatewayMetrics, databaseStatements, submitPhases } from "./metrics.ts";
import { serveGatewayMetrics } from "./metrics-listener.ts";
import { agentSessions } from "./sessions.ts";
import type { NodeGateway, NodeGatewayOptions } from "./types.ts";

export type { NodeGateway, NodeGatewayOptions } from "./types.ts";

export async function startNodeGateway(options: NodeGatewayOptions): Promise<NodeGateway> {
  const log = options.logger ?? pino({ name: "gantry-gateway" });
  // Checked before anything starts: a bad entry fails the start with its setting's name.
  const addressOf = nodeAddressOf(options.trustedProxies ?? []);
  if (options.s3) {
    // Before the first AWS SDK client (openSqsUrl does the same for an SQS queue).
    routeAwsSdkNodeWarning(log);
    await checkS3Credentials(options.s3);
  }
  // OpenTelemetry, only when OTEL_EXPORTER_OTLP_ENDPOINT asks for it (else not even loaded).
  const tracing = await startTracing("gantry-gateway");
  const settings = feedSettings(options.databaseUrl);
  const statements = databaseStatements();
  const database = await openDatabase(options.databaseUrl, {
    setting: "GANTRY_DATABASE_URL",
    ...(settings ? { settings } : {}),
    onStatement: statements.count,
  });
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
  const stopping = new AbortController();
  // Every open event stream and wait listens for the shutdown: thousands are expected.
  setMaxListeners(0, stopping.signal);
  let inFlight = 0;
  const sessions = agentSessions();
  const server = serve({
    port: options.port,
    hostname: options.host,
    websocket: { server: sessions.server },
    fetch: async (request, env) => {
      // No /metrics here: Prometheus scrapes the metrics listener (GANTRY_METRICS_PORT), so
      // the public port answers it 404, as it would any unknown path.
      if (!app) return new Response("starting", { status: 503 });
      if (sessions.handles(request)) return sessions.fetch(request, env);
      inFlight++;
      try {
        // `env` carries the IncomingMessage, which readIncomingBody reads JSON bodies from.
        return await app.fetch(request, env);
      } finally {
        inFlight--;
      }
    },
  });
  answerClientErrors(server);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("listening", resolve);
      server.once("error", reject);
    });
  } catch (error) {
    // Port taken: release the database and queue so the process can exit with the error.
    await opened.close().catch(() => {});
    await database.close().catch(() => {});
    // A taken or forbidden port, or a host that names no address here, is the operator's to
    // fix: one line naming PORT and GANTRY_HOST, no stack.
    const code = listenRefusalCode(error);
    if (code) {
      throw new UserError(
        `cannot listen on ${options.host}:${options.port} (${code}): set PORT or GANTRY_HOST`,
      );
    }
    throw error;
  }
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  const url = options.publicUrl ?? `http://${options.host}:${port}`;

  const blobs = await nodeBlobs(options, url, log);
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
    ...(tracing ? { tracer: tracing.tracer } : {}),
    // SQLite's bound is 32766 and Postgres's 65535: batches of a few hundred jobs.
    stores: createKyselyStores(db, { maxParameters: 10_000 }),
    queue,
    ...(opened.leases ? { queueLeases: opened.leases } : {}),
    blobs: blobs.store,
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
    ...(blobs.local ? { localBlobs: blobs.local } : {}),
    agentCrypto: nodeAgentCrypto,
    cursorCipher: nodeCursorCipher,
    readRawBody: readIncomingBody,
    assets: diskAssets(),
  });
  app = createApp(gateway);
  sessions.attach(gateway, app);
  const listener = await startChangeFeed(
    gateway.notifier,
    { dialect: database.dialect, url: options.databaseUrl, db, ...(settings ? { settings } : {}) },
    options.changeFeed,
    log,
  );
  const metrics = createGatewayMetrics(gateway, [phases.metric, statements.metric]);
  const served = await serveGatewayMetrics(options, metrics.registry, log).catch(async (error) => {
    await listener.close().catch(() => {});
    server.close();
    await opened.close().catch(() => {});
    await database.close().catch(() => {});
    throw error;
  });
  limitAnonymousByAddress(gateway, addressOf);
  const sharedLimits = await startSharedLimits(gateway, database, {
    ...options.sharedLimits,
    // The limiter's rounds are what sees the other gateways on this database.
    ...(blobs.local ? { onGateways: warnOfSharedDiskBlobs(log) } : {}),
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

  // Webhooks go out beside the sweep, never inside it: an endpoint that never answers holds
  // a slot for the attempt's timeout, and nothing else.
  const { intervalMs: webhookIntervalMs, ...dispatchOptions } = options.webhooks ?? {};
  const dispatcher = createWebhookDispatcher(
    () => gateway.stores.webhooks,
    () => webhookDeps(gateway),
    {
      ...dispatchOptions,
      onError: (error, delivery) =>
        log.error({ delivery_id: delivery.id, err: String(error) }, "webhook delivery failed"),
    },
  );
  let dispatching: Promise<unknown> | null = null;
  const dispatchTimer = setInterval(() => {
    dispatching ??= dispatcher
      .tick()
      .catch((error) => log.error({ err: String(error) }, "webhook dispatch failed"))
      .finally(() => {
        dispatching = null;
      });
  }, webhookIntervalMs ?? options.sweepIntervalMs);
  dispatchTimer.unref();

  return {
    url,
    gateway,
    db,
    dialect: database.dialect,
    queue,
    queueDescription: opened.description,
    blobsDescription: blobs.description,
    server,
    metricsUrl: served?.url ?? null,
    addMetrics: served?.add ?? null,
    sweepNow: () => sweep(gateway, sweepOptions),
    sendWebhooksNow: () => dispatcher.tick(),
    agentFetch: (agentId) => sessions.agentFetch(agentId),
    agentCalls: (agentId) => sessions.agentCalls(agentId),
    async close() {
      clearInterval(timer);
      clearInterval(dispatchTimer);
      await listener.close();
      await sharedLimits?.close();
      // Agents reconnect with backoff, to this gateway's successor; nothing they hold is lost.
      // Their sessions' calls end (and give back what they took) before the database closes.
      const sessionsClosed = sessions.closeAll();
      await drain(server, stopping, () => inFlight, options.shutdownMs ?? 10_000);
      await sessionsClosed;
      await served?.close();
      await Promise.allSettled([...pending, sweeping, dispatching]);
      await dispatcher.drain();
      await opened.close();
      await database.close();
      await tracing?.shutdown();
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
    leases: queue.leases,
    description: `sql queue in ${database.description}`,
    close: () => queue.close(),
  };
}
