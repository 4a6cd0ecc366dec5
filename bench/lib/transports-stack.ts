/**
 * One Gantry stack per transport for `transports.ts`: the gateway and one agent as separate
 * processes (as deployed), on the job store and queue the transport names, each with its
 * own schema, prefix or file, removed afterwards. Not a benchmark itself.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Kysely } from "kysely";
import { openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import type { Database } from "../../shared/db/schema.ts";
import { randomToken } from "../../shared/ids.ts";
import { openQueue } from "../../shared/queue/open/index.ts";
import { freshPostgresUrl } from "../../test/helpers/test-gateway.ts";
import { BENCH_AMQP_URL } from "./bench-rabbit.ts";
import { stopChild, waitForLine } from "./child.ts";

const ROOT = join(import.meta.dirname, "../..");
const REDIS = process.env.GANTRY_BENCH_REDIS_URL ?? "redis://127.0.0.1:6379";
const NATS = process.env.GANTRY_BENCH_NATS_URL ?? "nats://127.0.0.1:4222";

export const TRANSPORTS = [
  "sql-sqlite",
  "sql-postgres",
  "amqp-quorum",
  "amqp-classic",
  "redis",
  "nats",
] as const;
export type Transport = (typeof TRANSPORTS)[number];

/** The broker process each transport adds to the stack, by its /proc comm. */
export const BROKER_PROCESS: Record<Transport, string | null> = {
  "sql-sqlite": null,
  "sql-postgres": "postgres",
  "amqp-quorum": "beam.smp",
  "amqp-classic": "beam.smp",
  redis: "redis-server",
  nats: "nats-server",
};

export interface TransportStack {
  url: string;
  apiKey: string;
  db: Kysely<Database>;
  pids(): number[];
  close(): Promise<void>;
}

export async function startTransportStack(
  transport: Transport,
  options: { lookahead: number },
): Promise<TransportStack> {
  const dataDir = mkdtempSync(join(tmpdir(), "gantry-transports-"));
  const postgres = transport === "sql-sqlite" ? null : freshPostgresUrl("gantry_bench");
  const databaseUrl = postgres?.url ?? join(dataDir, "gantry.db");
  const prefix = `bench-${randomToken(6).replace(/[^A-Za-z0-9]/g, "x")}`;
  const queueUrl = {
    "sql-sqlite": null,
    "sql-postgres": null,
    "amqp-quorum": `${BENCH_AMQP_URL}?queue_type=quorum&prefix=${prefix}`,
    "amqp-classic": `${BENCH_AMQP_URL}?queue_type=classic&prefix=${prefix}`,
    redis: `${REDIS}?prefix=${prefix}`,
    nats: `${NATS}?prefix=${prefix}`,
  }[transport];
  const apiKey = `gk_${randomToken(24)}`;
  const agentToken = `gat_${randomToken(24)}`;
  const quiet = process.env.BENCH_LOG_LEVEL ?? "warn";
  const gateway = spawn(
    process.execPath,
    ["--import", "tsx", join(ROOT, "bench/lib/gateway-process.ts")],
    {
      env: {
        ...process.env,
        BENCH_GATEWAY: JSON.stringify({ databaseUrl, queueUrl, apiKey, agentToken, dataDir }),
      },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const [, url] = await waitForLine(gateway, "stdout", /^READY (\S+)/);
  const agent = spawn(process.execPath, [join(ROOT, "bin/gantry-agent.js"), "run"], {
    env: {
      ...process.env,
      GANTRY_GATEWAY_URL: url,
      GANTRY_AGENT_TOKEN: agentToken,
      GANTRY_QUEUE_URL: queueUrl ?? databaseUrl,
      GANTRY_MODELS: "noop",
      GANTRY_SLOTS: "1",
      GANTRY_LOOKAHEAD: String(options.lookahead),
      GANTRY_THREADS: "1",
      GANTRY_EXECUTION_PROVIDERS: "cpu",
      GANTRY_LOG_LEVEL: quiet,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  await waitForLine(agent, "stderr", /waiting for jobs/);
  const database = await openDatabase(databaseUrl, { maxConnections: 2 });
  return {
    url: url!,
    apiKey,
    db: database.db,
    pids: () => [gateway.pid ?? 0, agent.pid ?? 0],
    async close() {
      await stopChild(agent);
      await stopChild(gateway);
      await database.close();
      if (postgres) await dropPostgresSchema(postgres.url, postgres.schema);
      if (queueUrl) await dropQueue(queueUrl);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Removes what the bench declared on a shared broker. */
async function dropQueue(url: string): Promise<void> {
  const opened = await openQueue(url);
  const queue = opened.queue as { deleteAll?(): Promise<void>; deleteTopology?(): Promise<void> };
  try {
    await opened.queue.depth("noop"); // on amqp, makes the model's queues this instance's
    await (queue.deleteAll ?? queue.deleteTopology)?.call(queue);
  } finally {
    await opened.close();
  }
}
