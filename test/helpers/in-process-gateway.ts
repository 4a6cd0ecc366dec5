import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import type { Hono } from "hono";
import type { Kysely } from "kysely";
import pino from "pino";
import { createApp, createGateway } from "../../gateway/app.ts";
import { GatewayConfig, type GatewayConfigInput } from "../../gateway/config.ts";
import type { Gateway } from "../../gateway/context.ts";
import type { AppEnv } from "../../gateway/env.ts";
import type { PlanName, PlanOverrides } from "../../gateway/plans.ts";
import { ALL_SCOPES, insertApiKey, type Scope } from "../../gateway/store/api-keys.ts";
import { createKyselyStores } from "../../gateway/store/kysely-stores.ts";
import { insertTenant } from "../../gateway/store/tenants.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import { createDiskBlobStore } from "../../shared/blob/disk.ts";
import type { Database } from "../../shared/db/schema.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import { randomToken } from "../../shared/ids.ts";
import type { JobQueue } from "../../shared/queue/port.ts";
import { createSqlQueue } from "../../shared/queue/sql/index.ts";

/**
 * The runtime-free gateway on the embedded stack (SQLite, `sql` queue, disk blobs), driven
 * with `app.request()` in this process: no port, no HTTP, a clock the test moves, and every
 * log line kept for inspection.
 */
export interface InProcessGateway {
  app: Hono<AppEnv>;
  gateway: Gateway;
  db: Kysely<Database>;
  queue: JobQueue;
  /** The SQLite file, for a second connection (the CLI) on the same data. */
  databasePath: string;
  clock: { now: number; advance(ms: number): void };
  /** Every log line the gateway wrote, as JSON text. */
  logs: string[];
  /** Makes a tenant on `plan` with one key of `scopes`; returns the key. */
  addTenant(options: TenantOptions): Promise<string>;
  /** `app.request` with `Authorization: Bearer key` (unless `key` is null) and JSON bodies. */
  request(path: string, init?: RequestOptions): Promise<Response>;
  /**
   * Waits for the gateway's background work (webhook sends, publish marks, batch
   * completion), then closes everything; rejects if any background work failed, so a
   * failure there fails the test instead of vanishing.
   */
  close(): Promise<void>;
}

export interface TenantOptions {
  id: string;
  plan?: PlanName;
  limits?: PlanOverrides;
  scopes?: readonly Scope[];
}

export interface RequestOptions extends RequestInit {
  key?: string | null;
  json?: unknown;
}

const PUBLIC_URL = "http://gantry.test";

export async function startInProcessGateway(
  config: Partial<GatewayConfigInput> = {},
): Promise<InProcessGateway> {
  const dir = mkdtempSync(join(tmpdir(), "gantry-inproc-"));
  const databasePath = join(dir, "gantry.db");
  const db = await openSqlite(databasePath);
  const clock = {
    now: Date.now(),
    advance(ms: number) {
      clock.now += ms;
    },
  };
  const queue = createSqlQueue(db, { dialect: "sqlite", clock: () => clock.now });
  const blobSecret = randomToken(32);
  const blobs = createDiskBlobStore({
    root: join(dir, "blobs"),
    publicBaseUrl: PUBLIC_URL,
    secret: blobSecret,
  });
  const logs: string[] = [];
  const running = new Set<Promise<unknown>>();
  const failures: unknown[] = [];
  const background = (work: Promise<unknown>) => {
    const tracked = work.catch((error: unknown) => void failures.push(error));
    running.add(tracked);
    void tracked.finally(() => running.delete(tracked));
  };
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logs.push(String(chunk));
      done();
    },
  });
  const gateway = createGateway({
    stores: createKyselyStores(db),
    queue,
    blobs,
    config: GatewayConfig.parse({
      publicUrl: PUBLIC_URL,
      models: ["ocr", "noop"],
      agentToken: `gat_${randomToken(24)}`,
      allowInsecureWebhooks: true,
      ...config,
    }),
    log: pino({ level: "info" }, sink),
    now: () => clock.now,
    fetch: () => Promise.reject(new Error("no network in in-process tests")),
    background,
    localBlobs: { backend: blobs, secret: blobSecret, now: () => clock.now },
  });
  const app = createApp(gateway);

  return {
    app,
    gateway,
    db,
    queue,
    databasePath,
    clock,
    logs,
    async addTenant(options) {
      await insertTenant(db, {
        id: options.id,
        name: options.id,
        plan: options.plan ?? "pro",
        overrides: options.limits ?? null,
        webhookSecret: newWebhookSecret(),
        now: clock.now,
      });
      const created = await insertApiKey(db, {
        tenantId: options.id,
        scopes: options.scopes ?? ALL_SCOPES,
        now: clock.now,
      });
      if (!created) throw new Error("key collision");
      return created.key;
    },
    async request(path, init = {}) {
      const { key, json, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (key) headers.set("authorization", `Bearer ${key}`);
      let body = rest.body;
      if (json !== undefined) {
        headers.set("content-type", "application/json");
        body = JSON.stringify(json);
      }
      return app.request(path, { ...rest, headers, body: body ?? null }, undefined);
    },
    async close() {
      // Work may start more work (a publish mark after a publish): wait until none is left.
      while (running.size > 0) await Promise.all(running);
      await queue.close();
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
      if (failures.length > 0) {
        throw new AggregateError(
          failures,
          `the gateway's background work failed ${failures.length} time(s)`,
        );
      }
    },
  };
}

/** A response's problem+json body, checked for the shape every error must have. */
export async function problemOf(response: Response): Promise<{
  status: number;
  code: string;
  title: string;
  detail?: string;
  [field: string]: unknown;
}> {
  const type = response.headers.get("content-type") ?? "";
  if (!type.includes("application/problem+json")) {
    throw new Error(`expected problem+json, got ${response.status} ${type}`);
  }
  const body = (await response.json()) as { status: number; code: string; title: string };
  if (body.status !== response.status) {
    throw new Error(`problem status ${body.status} differs from HTTP ${response.status}`);
  }
  return body;
}
