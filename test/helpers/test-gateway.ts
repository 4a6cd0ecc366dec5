import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import {
  type NodeGateway,
  type NodeGatewayOptions,
  startNodeGateway,
} from "../../gateway/runtime/node/index.ts";
import { ensureTenantWithKey } from "../../gateway/store/tenants.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import { type OpenedDatabase, openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import type { OnStatement } from "../../shared/db/statement-log.ts";
import { randomToken } from "../../shared/ids.ts";

/** The local test server (PGHOST/PGPORT/PGUSER/PGDATABASE override it). */
export const TEST_POSTGRES_URL = `postgres://${process.env.PGUSER ?? "postgres"}@${
  process.env.PGHOST ?? "127.0.0.1"
}:${process.env.PGPORT ?? 5432}/${process.env.PGDATABASE ?? "test"}`;

/** A URL naming a schema no one uses yet; `openDatabase` creates it. */
export function freshPostgresUrl(prefix = "gantry_test"): { url: string; schema: string } {
  const schema = `${prefix}_${randomToken(10)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, "x")}`;
  return { url: `${TEST_POSTGRES_URL}?schema=${schema}`, schema };
}

export interface TestGatewayOptions {
  models?: string[];
  maxAttempts?: number;
  /**
   * `sqlite` (default): a file in the gateway's temp dir. `postgres`: a fresh schema on the
   * local test server, dropped on close. `{ url }`: that database, left as it is on close
   * (another test gateway made it and will drop it).
   */
  database?: "sqlite" | "postgres" | { url: string };
  /** Null or absent: the `sql` queue in the gateway's database. */
  queueUrl?: string | null;
  leaseSeconds?: number;
  sweepIntervalMs?: number;
  sweep?: NodeGatewayOptions["sweep"];
  webhooks?: NodeGatewayOptions["webhooks"];
  wrapQueue?: NodeGatewayOptions["wrapQueue"];
  config?: NodeGatewayOptions["config"];
  changeFeed?: NodeGatewayOptions["changeFeed"];
  trustedProxies?: string[];
  sharedLimits?: NodeGatewayOptions["sharedLimits"];
  /** A metrics listener (GANTRY_METRICS_PORT; 0: any free port), on loopback. */
  metricsPort?: number;
  /** False: webhooks as outside embedded mode (https, public or GANTRY_WEBHOOK_ALLOW). */
  allowInsecureWebhooks?: boolean;
  /** Blobs in this bucket (GANTRY_S3_*) instead of the data directory. */
  s3?: NodeGatewayOptions["s3"];
  /** Where the gateway logs; silent (or GANTRY_TEST_LOG's level) by default. */
  logger?: NodeGatewayOptions["logger"];
}

export interface TestGateway extends NodeGateway {
  apiKey: string;
  agentToken: string;
  dataDir: string;
  webhookSecret: string;
  /** What the gateway was opened with: hand them to agents in other processes. */
  databaseUrl: string;
  queueUrl: string;
  /** Makes another tenant and returns its API key. */
  addTenant(id: string): Promise<string>;
  /** fetch against the gateway with the API key. */
  api(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
}

export async function startTestGateway(options: TestGatewayOptions = {}): Promise<TestGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), "gantry-test-"));
  const agentToken = `gat_${randomToken(24)}`;
  const database = options.database ?? "sqlite";
  const fresh = database === "postgres" ? freshPostgresUrl() : null;
  const databaseUrl =
    typeof database === "object" ? database.url : (fresh?.url ?? join(dataDir, "gantry.db"));
  let node: NodeGateway;
  try {
    node = await startNodeGateway({
      port: 0,
      host: "127.0.0.1",
      publicUrl: null,
      databaseUrl,
      queueUrl: options.queueUrl ?? null,
      blobDir: join(dataDir, "blobs"),
      blobSecret: randomToken(32),
      agentToken,
      models: options.models ?? ["ocr", "noop"],
      maxUploadBytes: 5 * 1024 * 1024,
      sweepIntervalMs: options.sweepIntervalMs ?? 500,
      allowInsecureWebhooks: options.allowInsecureWebhooks ?? true,
      logger: options.logger ?? pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
      ...(options.maxAttempts ? { maxAttempts: options.maxAttempts } : {}),
      ...(options.leaseSeconds ? { leaseSeconds: options.leaseSeconds } : {}),
      ...(options.sweep ? { sweep: options.sweep } : {}),
      ...(options.webhooks ? { webhooks: options.webhooks } : {}),
      ...(options.wrapQueue ? { wrapQueue: options.wrapQueue } : {}),
      ...(options.config ? { config: options.config } : {}),
      ...(options.changeFeed ? { changeFeed: options.changeFeed } : {}),
      ...(options.trustedProxies ? { trustedProxies: options.trustedProxies } : {}),
      ...(options.sharedLimits ? { sharedLimits: options.sharedLimits } : {}),
      ...(options.metricsPort === undefined ? {} : { metricsPort: options.metricsPort }),
      ...(options.s3 ? { s3: options.s3 } : {}),
    });
  } catch (error) {
    if (fresh) await dropPostgresSchema(fresh.url, fresh.schema).catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  const addTenant = async (id: string) => {
    const apiKey = `gk_${randomToken(24)}`;
    await ensureTenantWithKey(node.db, { id, name: id, apiKey, webhookSecret: newWebhookSecret() });
    return apiKey;
  };
  const apiKey = await addTenant("ten_test");
  const { webhook_secret: webhookSecret } = await node.db
    .selectFrom("tenants")
    .select("webhook_secret")
    .where("id", "=", "ten_test")
    .executeTakeFirstOrThrow();
  return {
    ...node,
    apiKey,
    agentToken,
    dataDir,
    webhookSecret,
    databaseUrl,
    queueUrl: options.queueUrl ?? databaseUrl,
    addTenant,
    api: (path, init = {}) => {
      const headers = new Headers(init.headers);
      if (!headers.has("authorization")) headers.set("authorization", `Bearer ${apiKey}`);
      let body = init.body;
      if (init.json !== undefined) {
        headers.set("content-type", "application/json");
        body = JSON.stringify(init.json);
      }
      return fetch(node.url + path, { ...init, headers, body: body ?? null });
    },
    async close() {
      try {
        await node.close();
      } finally {
        if (fresh) await dropPostgresSchema(fresh.url, fresh.schema);
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
  };
}

/** Presigns an upload and PUTs the bytes to it; returns the upload id. */
export async function uploadFile(
  gw: TestGateway,
  bytes: Uint8Array,
  contentType: string,
): Promise<string> {
  const response = await gw.api("/v1/uploads", {
    method: "POST",
    json: { content_type: contentType, size_bytes: bytes.length },
  });
  if (response.status !== 201)
    throw new Error(`upload presign: ${response.status} ${await response.text()}`);
  const upload = (await response.json()) as {
    id: string;
    url: string;
    headers: Record<string, string>;
  };
  const put = await fetch(upload.url, {
    method: "PUT",
    headers: upload.headers,
    body: new Uint8Array(bytes),
  });
  if (!put.ok) throw new Error(`upload PUT: ${put.status} ${await put.text()}`);
  return upload.id;
}

/** A migrated database for store-level tests: a temp SQLite file or a fresh Postgres schema. */
export async function openTestDatabase(
  kind: "sqlite" | "postgres",
  options: { onStatement?: OnStatement } = {},
): Promise<OpenedDatabase & { url: string }> {
  if (kind === "postgres") {
    const fresh = freshPostgresUrl();
    const opened = await openDatabase(fresh.url, options);
    return {
      ...opened,
      url: fresh.url,
      async close() {
        await opened.close();
        await dropPostgresSchema(fresh.url, fresh.schema);
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), "gantry-db-"));
  const url = join(dir, "gantry.db");
  const opened = await openDatabase(url, options);
  return {
    ...opened,
    url,
    async close() {
      await opened.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
