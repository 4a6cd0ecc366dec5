/**
 * What the queue benchmarks share: a Gantry stack of separate processes (gateway, agents)
 * on Postgres and RabbitMQ, an HTTP load generator, and the figures. Not a benchmark itself.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { connect } from "amqplib";
import type { Kysely } from "kysely";
import { Pool } from "undici";
import { openDatabase } from "../shared/db/open.ts";
import { dropPostgresSchema } from "../shared/db/postgres.ts";
import type { Database } from "../shared/db/schema.ts";
import { randomToken } from "../shared/ids.ts";
import { createAmqpQueue } from "../shared/queue/amqp/index.ts";
import { freshPostgresUrl } from "../test/helpers/test-gateway.ts";

const ROOT = join(import.meta.dirname, "..");
const AMQP_URL = process.env.GANTRY_BENCH_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672";
/** `GANTRY_BENCH_PROFILE=<dir>`: V8 CPU profiles of the gateway and agents, to find hot spots. */
const PROFILE_DIR = process.env.GANTRY_BENCH_PROFILE;
const profileArgs = PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`] : [];

export interface Stack {
  url: string;
  apiKey: string;
  /** "Postgres + RabbitMQ (quorum)", or the fallback in use. */
  description: string;
  /** A pool on the stack's database, for reading results without the API. */
  db: Kysely<Database>;
  /** `lookahead`: deliveries claimed beyond the slots (GANTRY_LOOKAHEAD; the agent's default when absent). */
  startAgent(options: { slots: number; lookahead?: number }): Promise<AgentProcess>;
  /** Process ids, for the CPU meter. */
  pids(): { gateway: number[]; agents: number[] };
  close(): Promise<void>;
}

export interface AgentProcess {
  stop(): Promise<void>;
}

async function rabbitReachable(): Promise<boolean> {
  try {
    const connection = await connect(AMQP_URL);
    await connection.close();
    return true;
  } catch {
    return false;
  }
}

/** Reads lines from a child until one matches, or the child exits. */
async function waitForLine(child: ChildProcess, stream: "stdout" | "stderr", match: RegExp) {
  const lines = createInterface({ input: child[stream]! });
  const seen: string[] = [];
  const exited = once(child, "exit").then(() => {
    throw new Error(`process exited before "${match.source}":\n${seen.slice(-20).join("\n")}`);
  });
  const found = new Promise<RegExpMatchArray>((resolve) => {
    lines.on("line", (line) => {
      seen.push(line);
      const hit = match.exec(line);
      if (hit) resolve(hit);
    });
  });
  return Promise.race([found, exited]);
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  await exited;
  clearTimeout(timer);
}

/**
 * A fresh Postgres schema and RabbitMQ prefix, the gateway in its own process, and
 * agents on demand (each `gantry-agent run` in its own process, as deployed).
 */
export async function startStack(
  say: (line: string) => void,
  {
    queueType = "quorum",
    gateway: gatewayExtra = {},
  }: {
    queueType?: "quorum" | "classic";
    /** More of queue-gateway-process.ts's spec (sweep interval, retention: the soak). */
    gateway?: Record<string, unknown>;
  } = {},
): Promise<Stack> {
  const postgres = freshPostgresUrl("gantry_bench");
  const useRabbit = process.env.GANTRY_BENCH_QUEUE !== "sql" && (await rabbitReachable());
  const prefix = `gantry-bench-${randomToken(6).replace(/[^A-Za-z0-9]/g, "x")}`;
  const queueUrl = useRabbit ? `${AMQP_URL}?queue_type=${queueType}&prefix=${prefix}` : null;
  const description = useRabbit
    ? `Postgres + RabbitMQ (${queueType} queues)`
    : "Postgres + the sql queue on Postgres (RabbitMQ not reachable)";
  const dataDir = mkdtempSync(join(tmpdir(), "gantry-bench-"));
  const apiKey = `gk_${randomToken(24)}`;
  const agentToken = `gat_${randomToken(24)}`;
  const children: ChildProcess[] = [];
  const agentPids: number[] = [];

  say(`starting the gateway (${description})…`);
  const gateway = spawn(
    process.execPath,
    [...profileArgs, "--import", "tsx", join(ROOT, "bench/queue-gateway-process.ts")],
    {
      env: {
        ...process.env,
        BENCH_GATEWAY: JSON.stringify({
          databaseUrl: postgres.url,
          queueUrl,
          apiKey,
          agentToken,
          dataDir,
          ...gatewayExtra,
        }),
      },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  children.push(gateway);
  const [, url] = (await waitForLine(gateway, "stdout", /^READY (\S+)/)) as RegExpMatchArray;
  const database = await openDatabase(postgres.url, { maxConnections: 2 });

  return {
    url: url!,
    apiKey,
    description,
    db: database.db,
    pids: () => ({ gateway: gateway.pid ? [gateway.pid] : [], agents: agentPids }),
    async startAgent({ slots, lookahead }) {
      const agent = spawn(
        process.execPath,
        [...profileArgs, join(ROOT, "bin/gantry-agent.js"), "run"],
        {
          env: {
            ...process.env,
            GANTRY_GATEWAY_URL: url,
            GANTRY_AGENT_TOKEN: agentToken,
            GANTRY_QUEUE_URL: queueUrl ?? postgres.url,
            GANTRY_MODELS: "noop",
            GANTRY_SLOTS: String(slots),
            ...(lookahead === undefined ? {} : { GANTRY_LOOKAHEAD: String(lookahead) }),
            GANTRY_THREADS: "1",
            GANTRY_EXECUTION_PROVIDERS: "cpu",
            GANTRY_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "warn",
          },
          stdio: ["ignore", "ignore", "pipe"],
        },
      );
      children.push(agent);
      if (agent.pid) agentPids.push(agent.pid);
      await waitForLine(agent, "stderr", /waiting for jobs/);
      return { stop: () => stopChild(agent) };
    },
    async close() {
      for (const child of children.reverse()) await stopChild(child);
      await database.close();
      await dropPostgresSchema(postgres.url, postgres.schema);
      if (queueUrl) {
        const queue = createAmqpQueue({ url: AMQP_URL, prefix });
        await queue.depth("noop");
        await queue.deleteTopology();
        await queue.close();
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A keep-alive HTTP client with `connections` sockets to the gateway. */
export function httpClient(url: string, connections: number) {
  return new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
}

export interface Submitted {
  id: string;
  /** Date.now() when the request was sent: the same clock the gateway stamps jobs with. */
  sentAt: number;
  /** Round trip of the POST, ms. */
  latencyMs: number;
}

/** POSTs one noop job; throws on anything but 202. */
export async function submitJob(pool: Pool, apiKey: string, input: unknown): Promise<Submitted> {
  const sentAt = Date.now();
  const started = performance.now();
  const response = await pool.request({
    method: "POST",
    path: "/v1/jobs",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "noop", input }),
  });
  const text = await response.body.text();
  const latencyMs = performance.now() - started;
  if (response.statusCode !== 202) throw new Error(`POST /v1/jobs: ${response.statusCode} ${text}`);
  return { id: (JSON.parse(text) as { id: string }).id, sentAt, latencyMs };
}

/** The gateway's own stamps of one job (Date.now() ms): where its latency went. */
export interface JobStamps {
  createdAt: number;
  startedAt: number;
  finishedAt: number;
}

/**
 * Waits until `ids` have all succeeded, saying how far it got. Polls the database for jobs
 * that finished since the last poll (the `(status, updated_at)` index makes that a short
 * range scan), not for every pending id: the load generator must not load the system it
 * measures. Finish times are the gateway's own stamps, so polling late skews nothing.
 */
export async function waitSucceeded(
  db: Kysely<Database>,
  ids: string[],
  say: (line: string) => void,
  timeoutMs = 300_000,
): Promise<Map<string, JobStamps>> {
  const wanted = new Set(ids);
  const finished = new Map<string, JobStamps>();
  const deadline = Date.now() + timeoutMs;
  let lastSaid = Date.now();
  // Submits were stamped after the bench started; a minute of slack covers clock steps.
  let since = Date.now() - 60_000;
  while (finished.size < wanted.size) {
    if (Date.now() > deadline) throw new Error(`${wanted.size - finished.size} jobs unfinished`);
    const pollStarted = Date.now();
    const rows = await db
      .selectFrom("jobs")
      .select(["id", "status", "created_at", "started_at", "finished_at"])
      .where("status", "in", ["succeeded", "failed"])
      .where("updated_at", ">=", since)
      .execute();
    // Rows committed during the poll may carry earlier stamps: look back a little next time.
    since = pollStarted - 1_500;
    for (const row of rows) {
      if (!wanted.has(row.id)) continue;
      if (row.status !== "succeeded") throw new Error(`job ${row.id} ${row.status}`);
      finished.set(row.id, {
        createdAt: Number(row.created_at),
        startedAt: Number(row.started_at),
        finishedAt: Number(row.finished_at),
      });
    }
    if (finished.size < wanted.size) {
      if (Date.now() - lastSaid > 3_000) {
        say(`  ${finished.size}/${ids.length} succeeded…`);
        lastSaid = Date.now();
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  return finished;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export const ms = (value: number) => `${value.toFixed(value < 10 ? 1 : 0)} ms`;
