import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { type NodeGateway, startNodeGateway } from "../../gateway/node.ts";
import { ensureTenantWithKey } from "../../gateway/store/tenants.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import { randomToken } from "../../shared/ids.ts";

export interface TestGateway extends NodeGateway {
  apiKey: string;
  agentToken: string;
  dataDir: string;
  webhookSecret: string;
  /** Makes another tenant and returns its API key. */
  addTenant(id: string): Promise<string>;
  /** fetch against the gateway with the API key. */
  api(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
}

export async function startTestGateway(
  options: { models?: string[]; maxAttempts?: number } = {},
): Promise<TestGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), "gantry-test-"));
  const agentToken = `gat_${randomToken(24)}`;
  const node = await startNodeGateway({
    port: 0,
    host: "127.0.0.1",
    publicUrl: null,
    databasePath: join(dataDir, "gantry.db"),
    blobDir: join(dataDir, "blobs"),
    blobSecret: randomToken(32),
    agentToken,
    models: options.models ?? ["ocr", "noop"],
    maxUploadBytes: 5 * 1024 * 1024,
    sweepIntervalMs: 500,
    allowInsecureWebhooks: true,
    logger: pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
    ...(options.maxAttempts ? { maxAttempts: options.maxAttempts } : {}),
  });
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
      await node.close();
      rmSync(dataDir, { recursive: true, force: true });
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
