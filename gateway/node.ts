import { type ServerType, serve } from "@hono/node-server";
import type { Kysely } from "kysely";
import pino from "pino";
import { createDiskBlobStore } from "../shared/blob/disk.ts";
import type { Database } from "../shared/db/schema.ts";
import { openSqlite } from "../shared/db/sqlite.ts";
import type { JobQueue } from "../shared/queue/port.ts";
import { createSqlQueue } from "../shared/queue/sql.ts";
import { createApp, createGateway } from "./app.ts";
import { GatewayConfig } from "./config.ts";
import type { Gateway } from "./context.ts";
import { sweep } from "./sweep.ts";

/** The Node entry: the only gateway file, beside `worker.ts`, that knows its runtime. */
export interface NodeGatewayOptions {
  port: number;
  host: string;
  /** Defaults to `http://host:port` once the port is known. */
  publicUrl: string | null;
  /** SQLite file; the embedded default. */
  databasePath: string;
  blobDir: string;
  blobSecret: string;
  agentToken: string;
  models: string[];
  maxUploadBytes: number;
  sweepIntervalMs: number;
  allowInsecureWebhooks: boolean;
  logger?: pino.Logger;
  /** Queue limits shared with the agents (attempts before dead-lettering, lease). */
  maxAttempts?: number;
}

export interface NodeGateway {
  url: string;
  gateway: Gateway;
  db: Kysely<Database>;
  queue: JobQueue;
  server: ServerType;
  close(): Promise<void>;
}

export async function startNodeGateway(options: NodeGatewayOptions): Promise<NodeGateway> {
  const log = options.logger ?? pino({ name: "gantry-gateway" });
  const db = await openSqlite(options.databasePath);
  const queue = createSqlQueue(db, {
    dialect: "sqlite",
    limits: { maxAttempts: options.maxAttempts ?? 5 },
  });
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
  const server = serve({
    port: options.port,
    hostname: options.host,
    fetch: (request) => (app ? app.fetch(request) : new Response("starting", { status: 503 })),
  });
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : options.port;
  const url = options.publicUrl ?? `http://${options.host}:${port}`;

  const blobs = createDiskBlobStore({
    root: options.blobDir,
    publicBaseUrl: url,
    secret: options.blobSecret,
  });
  const config = GatewayConfig.parse({
    publicUrl: url,
    models: options.models,
    maxUploadBytes: options.maxUploadBytes,
    agentToken: options.agentToken,
    allowInsecureWebhooks: options.allowInsecureWebhooks,
  });
  const gateway = createGateway({
    db,
    queue,
    blobs,
    config,
    log,
    now: Date.now,
    fetch: globalThis.fetch,
    background,
    localBlobs: { backend: blobs, secret: options.blobSecret },
  });
  app = createApp(gateway);

  let sweeping: Promise<unknown> | null = null;
  const timer = setInterval(() => {
    sweeping ??= sweep(gateway)
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
    queue,
    server,
    async close() {
      clearInterval(timer);
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // SSE streams keep connections open; end them rather than wait minutes.
        if ("closeAllConnections" in server) server.closeAllConnections();
      });
      await Promise.allSettled([...pending, sweeping]);
      await queue.close();
      await db.destroy();
    },
  };
}
