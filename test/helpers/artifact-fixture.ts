import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { type NodeGateway, startNodeGateway } from "../../gateway/runtime/node/index.ts";
import { ensureTenantWithKey } from "../../gateway/store/tenants.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { randomToken } from "../../shared/ids.ts";
import { maskModel } from "./onnx-models.ts";

/**
 * A gateway that serves a models.yaml model (`rmbg`, task background-removal) and a real
 * agent running it from a models.yaml with a sha256-pinned ONNX file, sharing one queue:
 * the path a non-built-in model with artifacts takes in production.
 */
export interface ArtifactFixture {
  node: NodeGateway;
  agent: AgentHandle;
  /** fetch against the gateway as tenant `ten_test` (or with `apiKey`). */
  api(path: string, init?: RequestInit & { json?: unknown; apiKey?: string }): Promise<Response>;
  addTenant(id: string): Promise<string>;
  close(): Promise<void>;
}

export async function startArtifactFixture(): Promise<ArtifactFixture> {
  const dir = mkdtempSync(join(tmpdir(), "gantry-artifacts-"));
  const logger = pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" });
  const agentToken = `gat_${randomToken(24)}`;
  let node: NodeGateway | null = null;
  try {
    node = await startNodeGateway({
      port: 0,
      host: "127.0.0.1",
      publicUrl: null,
      databaseUrl: join(dir, "gantry.db"),
      queueUrl: null,
      blobDir: join(dir, "blobs"),
      blobSecret: randomToken(32),
      agentToken,
      models: ["rmbg"],
      maxUploadBytes: 5 * 1024 * 1024,
      sweepIntervalMs: 500,
      allowInsecureWebhooks: true,
      logger,
      config: { modelTasks: { rmbg: "background-removal" } },
    });
    const gateway = node;
    // The RMBG-2.0 signature (logits out, dynamic batch) at 32×32, so it builds and runs fast.
    const model = maskModel({ size: 32, style: "rmbg" });
    writeFileSync(join(dir, "rmbg.onnx"), model);
    const sha256 = createHash("sha256").update(model).digest("hex");
    const modelsFile = join(dir, "models.yaml");
    writeFileSync(
      modelsFile,
      `models:\n  - id: rmbg\n    task: background-removal\n    files:\n      - { name: model, url: ./rmbg.onnx, sha256: ${sha256} }\n`,
    );
    const config = parseAgentConfig({
      GANTRY_GATEWAY_URL: gateway.url,
      GANTRY_AGENT_TOKEN: agentToken,
      GANTRY_QUEUE_URL: "embedded",
      GANTRY_MODELS: "rmbg",
      GANTRY_MODELS_FILE: modelsFile,
      GANTRY_MODEL_CACHE_DIR: join(dir, "cache"),
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_SLOTS: "1",
      GANTRY_THREADS: "1",
      GANTRY_HEARTBEAT_INTERVAL_SECONDS: "1",
      GANTRY_LEASE_SECONDS: "10",
      GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
    });
    // The gateway's own queue object: on the `sql` queue a publish wakes the agent at once.
    const agent = await startAgent(config, {
      logger,
      openQueue: async () => ({
        queue: gateway.queue,
        description: "artifact fixture gateway queue",
        close: async () => {},
      }),
    });
    const addTenant = async (id: string) => {
      const apiKey = `gk_${randomToken(24)}`;
      await ensureTenantWithKey(gateway.db, {
        id,
        name: id,
        apiKey,
        webhookSecret: newWebhookSecret(),
      });
      return apiKey;
    };
    const defaultKey = await addTenant("ten_test");
    return {
      node: gateway,
      agent,
      addTenant,
      api: (path, { json, apiKey, ...init } = {}) => {
        const headers = new Headers(init.headers);
        headers.set("authorization", `Bearer ${apiKey ?? defaultKey}`);
        if (json !== undefined) headers.set("content-type", "application/json");
        const body = json === undefined ? (init.body ?? null) : JSON.stringify(json);
        return fetch(gateway.url + path, { ...init, headers, body });
      },
      async close() {
        try {
          await agent.stop();
        } finally {
          await gateway.close();
          rmSync(dir, { recursive: true, force: true });
        }
      },
    };
  } catch (error) {
    await node?.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
