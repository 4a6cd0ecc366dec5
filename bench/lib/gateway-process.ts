/**
 * The gateway the queue benchmarks load, in a process of its own so the load generator's
 * CPU is not the gateway's: `startNodeGateway` on Node, as `gantry gateway` runs it, with
 * the bench tenant's rate limits lifted (the limits are a product feature, not what is
 * measured). Not a benchmark itself: `queue-harness.ts` starts it.
 *
 * Reads BENCH_GATEWAY (JSON: databaseUrl, queueUrl, apiKey, agentToken, dataDir) and
 * prints one line, `READY <url> metrics=<metrics url>`, once it listens. SIGTERM closes it.
 * A line `AGENT <slots> [<look-ahead>]` on its stdin starts the agent `gantry start` runs
 * beside its gateway, in this process (the embedded default), and it answers `AGENT READY`.
 */
import { join } from "node:path";
import { createInterface } from "node:readline";
import pino from "pino";
import { startNodeGateway } from "../../gateway/runtime/node/index.ts";
import { KyselyAgentStore } from "../../gateway/store/agents.ts";
import { ensureTenantWithKey } from "../../gateway/store/tenants.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { randomToken } from "../../shared/ids.ts";

interface GatewaySpec {
  databaseUrl: string;
  queueUrl: string | null;
  apiKey: string;
  agentToken: string;
  dataDir: string;
  /** Default `auto`; `poll` for the change-feed bench's comparison. */
  changeFeed?: "auto" | "poll";
  /** Default `["noop"]`. */
  models?: string[];
  /** Sweep every this many ms (default 5 000), with retention batches this large (soak). */
  sweepIntervalMs?: number;
  retentionBatch?: number;
  /** Retention overrides for the bench tenant (seconds), so data turns over (soak). */
  retention?: Record<string, number>;
  /** GANTRY_RELEASE_WINDOW (the fairness bench). */
  releaseWindow?: number;
}

const spec = JSON.parse(process.env.BENCH_GATEWAY ?? "{}") as GatewaySpec;
const node = await startNodeGateway({
  port: 0,
  host: "127.0.0.1",
  publicUrl: null,
  databaseUrl: spec.databaseUrl,
  queueUrl: spec.queueUrl,
  blobDir: join(spec.dataDir, "blobs"),
  blobSecret: randomToken(32),
  agentToken: spec.agentToken,
  models: spec.models ?? ["noop"],
  ...(spec.changeFeed ? { changeFeed: spec.changeFeed } : {}),
  maxUploadBytes: 1024 * 1024,
  sweepIntervalMs: spec.sweepIntervalMs ?? 5_000,
  ...(spec.retentionBatch ? { sweep: { retention: { batch: spec.retentionBatch } } } : {}),
  allowInsecureWebhooks: true,
  logger: pino({ level: process.env.BENCH_LOG_LEVEL ?? "warn" }),
  // A saturation run queues tens of thousands of jobs: no 503 for a deep queue.
  config: {
    maxQueueDepth: 100_000_000,
    maxEventStreamsPerTenant: 100_000,
    ...(spec.releaseWindow ? { releaseWindow: spec.releaseWindow } : {}),
  },
  // Prometheus metrics on a listener of their own (any free port, loopback), as
  // GANTRY_METRICS_PORT serves them: the submit bench reads the phase histogram there.
  metricsPort: 0,
});
await ensureTenantWithKey(node.db, {
  id: "ten_bench",
  name: "bench",
  apiKey: spec.apiKey,
  webhookSecret: newWebhookSecret(),
});
const unlimited = {
  rate_per_second: 1_000_000,
  burst: 1_000_000,
  max_queued_jobs: 100_000_000,
  max_running_jobs: 1_000_000,
  ...spec.retention,
};
await node.db
  .updateTable("tenants")
  .set({ limits: JSON.stringify(unlimited) })
  .where("id", "=", "ten_bench")
  .execute();
process.stdout.write(`READY ${node.url} metrics=${node.metricsUrl}\n`);

const agents: AgentHandle[] = [];
createInterface({ input: process.stdin }).on("line", async (line) => {
  const [command, slots, lookahead] = line.trim().split(/\s+/);
  if (command !== "AGENT") return;
  // Loaded only for the embedded default, as `gantry start` does: a gateway alone runs
  // without the agent's onnxruntime and sharp, as `gantry gateway` does (its RSS is measured).
  const { startEmbeddedAgent } = await import("../../cli/embedded-agent.ts");
  const { row, secret } = await new KyselyAgentStore(node.db).create({
    name: "embedded",
    source: "admin",
    now: Date.now(),
  });
  agents.push(
    await startEmbeddedAgent(
      node,
      { agentId: row.id, secret },
      {
        env: {
          GANTRY_EXECUTION_PROVIDERS: "cpu",
          GANTRY_LOG_LEVEL: "warn",
          ...(lookahead ? { GANTRY_LOOKAHEAD: lookahead } : {}),
        },
        queueUrl: spec.queueUrl ?? spec.databaseUrl,
        models: spec.models ?? ["noop"],
        slots: Number(slots),
        threads: 1,
        logger: pino({ level: process.env.BENCH_LOG_LEVEL ?? "warn" }),
      },
    ),
  );
  process.stdout.write("AGENT READY\n");
});

process.on("SIGTERM", () => {
  Promise.all(agents.map((agent) => agent.stop()))
    .then(() => node.close())
    .then(
      () => process.exit(0),
      () => process.exit(1),
    );
});
