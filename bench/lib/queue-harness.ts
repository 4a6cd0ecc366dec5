/**
 * What the queue benchmarks share: a Gantry stack of separate processes (gateway, agents)
 * on Postgres and RabbitMQ, an HTTP load generator, and the figures. Not a benchmark itself.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "amqplib";
import type { Kysely } from "kysely";
import { Pool } from "undici";
import { openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import type { Database } from "../../shared/db/schema.ts";
import { randomToken } from "../../shared/ids.ts";
import { freshPostgresUrl } from "../../test/helpers/test-gateway.ts";
import { BENCH_AMQP_URL, deleteBenchTopology } from "./bench-rabbit.ts";
import { stopChild, waitForLine } from "./child.ts";

const ROOT = join(import.meta.dirname, "../..");
/** `GANTRY_BENCH_PROFILE=<dir>`: V8 CPU profiles of the gateway and agents, to find hot spots. */
const PROFILE_DIR = process.env.GANTRY_BENCH_PROFILE;
const profileArgs = PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`] : [];

export interface Stack {
  /** The first gateway's URL: the one agents are given. */
  url: string;
  /** Every gateway's URL (`gateways` of them), the first one first. */
  urls: string[];
  /** The first gateway's Prometheus `/metrics` (its metrics listener, not the public port). */
  metricsUrl: string;
  apiKey: string;
  /** "Postgres + RabbitMQ (quorum)", or the fallback in use. */
  description: string;
  /** A pool on the stack's database, for reading results without the API. */
  db: Kysely<Database>;
  /** False for the embedded default (SQLite): no Postgres write counters to read. */
  postgres: boolean;
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
    const connection = await connect(BENCH_AMQP_URL);
    await connection.close();
    return true;
  } catch {
    return false;
  }
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
    gateways = 1,
  }: {
    queueType?: "quorum" | "classic";
    /** More of queue-gateway-process.ts's spec (sweep interval, retention: the soak). */
    gateway?: Record<string, unknown>;
    /** Gateway processes on the one database and queue (not the embedded default's SQLite). */
    gateways?: number;
  } = {},
): Promise<Stack> {
  const postgres = freshPostgresUrl("gantry_bench");
  // `sql`: the sql queue, agents on the database; `gateway`: the sql queue served by the
  // gateway, agents without a queue URL; `embedded`: the embedded default (SQLite for jobs
  // and queue, the agent in the gateway's process, as `gantry start` runs them); otherwise
  // RabbitMQ when it answers.
  const benchQueue = process.env.GANTRY_BENCH_QUEUE;
  const viaGateway = benchQueue === "gateway";
  const embedded = benchQueue === "embedded";
  const useRabbit = benchQueue !== "sql" && !viaGateway && !embedded && (await rabbitReachable());
  const prefix = `gantry-bench-${randomToken(6).replace(/[^A-Za-z0-9]/g, "x")}`;
  const queueUrl = useRabbit ? `${BENCH_AMQP_URL}?queue_type=${queueType}&prefix=${prefix}` : null;
  const description = useRabbit
    ? `Postgres + RabbitMQ (${queueType} queues)`
    : viaGateway
      ? "Postgres + the sql queue on Postgres, served to agents by the gateway"
      : embedded
        ? "the embedded default: SQLite jobs and queue, the agent in the gateway's process " +
          "(its CPU counted as the gateway's, its runners as the agents')"
        : "Postgres + the sql queue on Postgres (agents on the database)";
  const dataDir = mkdtempSync(join(tmpdir(), "gantry-bench-"));
  const databaseUrl = embedded ? join(dataDir, "gantry.db") : postgres.url;
  const apiKey = `gk_${randomToken(24)}`;
  const agentToken = `gat_${randomToken(24)}`;
  const children: ChildProcess[] = [];
  const agentPids: number[] = [];

  if (embedded && gateways > 1) throw new Error("the embedded default runs one gateway");
  say(`starting ${gateways === 1 ? "the gateway" : `${gateways} gateways`} (${description})…`);
  const started: { process: ChildProcess; url: string; metricsUrl: string }[] = [];
  for (let i = 0; i < gateways; i++) {
    const child = spawn(
      process.execPath,
      [...profileArgs, "--import", "tsx", join(ROOT, "bench/lib/gateway-process.ts")],
      {
        env: {
          ...process.env,
          BENCH_GATEWAY: JSON.stringify({
            databaseUrl,
            queueUrl,
            apiKey,
            agentToken,
            dataDir: i === 0 ? dataDir : join(dataDir, `gateway-${i}`),
            ...gatewayExtra,
          }),
        },
        stdio: [embedded ? "pipe" : "ignore", "pipe", "inherit"],
      },
    );
    children.push(child);
    const [, url, metricsUrl] = (await waitForLine(
      child,
      "stdout",
      /^READY (\S+) metrics=(\S+)/,
    )) as RegExpMatchArray;
    started.push({ process: child, url: url as string, metricsUrl: metricsUrl as string });
  }
  const [first] = started;
  if (!first) throw new Error("no gateway started");
  const gateway = first.process;
  const url = first.url;
  const database = await openDatabase(databaseUrl, { maxConnections: 2 });
  const gatewayPids = started.flatMap((one) => (one.process.pid ? [one.process.pid] : []));

  return {
    url,
    urls: started.map((one) => one.url),
    metricsUrl: first.metricsUrl,
    apiKey,
    description,
    db: database.db,
    postgres: !embedded,
    pids: () => ({ gateway: gatewayPids, agents: agentPids }),
    async startAgent({ slots, lookahead }) {
      if (embedded) {
        // In the gateway's process (gateway-process.ts); its runners are its children.
        gateway.stdin?.write(`AGENT ${slots} ${lookahead ?? ""}\n`);
        await waitForLine(gateway, "stdout", /^AGENT READY/);
        if (gateway.pid) agentPids.push(gateway.pid);
        return { stop: async () => {} };
      }
      const agent = spawn(
        process.execPath,
        [...profileArgs, join(ROOT, "bin/gantry-agent.js"), "run"],
        {
          env: {
            ...process.env,
            GANTRY_GATEWAY_URL: url,
            GANTRY_AGENT_TOKEN: agentToken,
            ...(viaGateway ? {} : { GANTRY_QUEUE_URL: queueUrl ?? postgres.url }),
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
      if (!embedded) await dropPostgresSchema(postgres.url, postgres.schema);
      if (queueUrl) {
        await deleteBenchTopology(prefix);
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
  /** When the fair release handed it to the queue (issue 26). */
  releasedAt: number;
  startedAt: number;
  finishedAt: number;
  /**
   * When the gateway took the job's report (its `finished_at`), where `finishedAt` is when
   * the load generator heard of it.
   */
  reportedAt?: number;
}

/**
 * Waits until `ids` have all succeeded, saying how far it got. Polls the database for jobs
 * that finished since the last poll (the retention's index of kept outputs by `finished_at`
 * makes that a short range scan), not for every pending id: the load generator must not load the system it
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
      .select(["id", "status", "created_at", "released_at", "started_at", "finished_at"])
      .where("status", "in", ["succeeded", "failed"])
      // The terms of jobs_retention_outputs' condition (migration 0013), as its index asks.
      .where("finished_at", "is not", null)
      .where("data_expired_at", "is", null)
      .where("finished_at", ">=", since)
      .execute();
    // A row carries the time its report arrived, which may be seconds before its commit on
    // a loaded box (reports queue up behind a batched settle): look back past that.
    since = pollStarted - 4_000;
    for (const row of rows) {
      if (!wanted.has(row.id)) continue;
      if (row.status !== "succeeded") throw new Error(`job ${row.id} ${row.status}`);
      finished.set(row.id, {
        createdAt: Number(row.created_at),
        releasedAt: Number(row.released_at),
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
