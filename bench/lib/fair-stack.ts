/**
 * The fairness bench's stack (bench/fairness.ts): one or two gateways (gateway-process.ts,
 * each its own process) on one database and queue, and tenants made straight in the store
 * with the limits each scenario needs. Two set-ups: Postgres + RabbitMQ with agents as
 * `gantry-agent run` processes, and the embedded default (SQLite for jobs and the queue, the
 * agent in the gateway's process as `gantry start` runs it). Not a benchmark itself.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Kysely } from "kysely";
import { openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import type { Database } from "../../shared/db/schema.ts";
import { randomToken } from "../../shared/ids.ts";
import { proTenant } from "../../test/helpers/pro-tenant.ts";
import { freshPostgresUrl } from "../../test/helpers/test-gateway.ts";
import { BENCH_AMQP_URL, deleteBenchTopology } from "./bench-rabbit.ts";
import { stopChild, waitForLine } from "./child.ts";

const ROOT = join(import.meta.dirname, "../..");

export type FairSetup = "postgres-rabbitmq" | "embedded";

export interface FairStack {
  /** One URL per gateway. */
  urls: string[];
  db: Kysely<Database>;
  description: string;
  /** A tenant on `plan` with these overrides (rate limits lifted); returns its API key. */
  tenant(id: string, limits?: Record<string, number>): Promise<string>;
  startAgent(options: { slots: number }): Promise<void>;
  close(): Promise<void>;
}

export async function startFairStack(
  setup: FairSetup,
  options: { gateways: number; releaseWindow?: number },
): Promise<FairStack> {
  const dataDir = mkdtempSync(join(tmpdir(), "gantry-fair-"));
  const postgres = setup === "postgres-rabbitmq" ? freshPostgresUrl("gantry_fair") : null;
  const databaseUrl = postgres?.url ?? join(dataDir, "gantry.db");
  const prefix = `gantry-fair-${randomToken(6).replace(/[^A-Za-z0-9]/g, "x")}`;
  const queueUrl = postgres ? `${BENCH_AMQP_URL}?queue_type=quorum&prefix=${prefix}` : null;
  const agentToken = `gat_${randomToken(24)}`;
  const children: ChildProcess[] = [];
  const urls: string[] = [];
  for (let i = 0; i < options.gateways; i++) {
    const gateway = spawn(
      process.execPath,
      ["--import", "tsx", join(ROOT, "bench/lib/gateway-process.ts")],
      {
        env: {
          ...process.env,
          BENCH_GATEWAY: JSON.stringify({
            databaseUrl,
            queueUrl,
            apiKey: `gk_${randomToken(24)}`,
            agentToken,
            dataDir: join(dataDir, `gw${i}`),
            sweepIntervalMs: 1_000,
            ...(options.releaseWindow ? { releaseWindow: options.releaseWindow } : {}),
          }),
        },
        stdio: ["pipe", "pipe", "inherit"],
      },
    );
    children.push(gateway);
    const [, url] = (await waitForLine(gateway, "stdout", /^READY (\S+)/)) as RegExpMatchArray;
    urls.push(url as string);
  }
  const database = await openDatabase(databaseUrl, { maxConnections: 2 });
  return {
    urls,
    db: database.db,
    description: postgres ? "Postgres + RabbitMQ (quorum)" : "embedded: SQLite jobs and queue",
    async tenant(id, limits = {}) {
      const lifted = { rate_per_second: 1_000_000, burst: 1_000_000, max_queued_jobs: 1e8 };
      return (await proTenant(database.db, id, { ...lifted, ...limits })).apiKey;
    },
    async startAgent({ slots }) {
      const first = children[0];
      if (!postgres && first) {
        // The embedded default: the agent in the first gateway's process, as `gantry start`
        // runs it, sharing its SQLite queue (gateway-process.ts).
        first.stdin?.write(`AGENT ${slots}\n`);
        await waitForLine(first, "stdout", /^AGENT READY/);
        return;
      }
      const agent = spawn(process.execPath, [join(ROOT, "bin/gantry-agent.js"), "run"], {
        env: {
          ...process.env,
          GANTRY_GATEWAY_URL: urls[0],
          GANTRY_AGENT_TOKEN: agentToken,
          GANTRY_QUEUE_URL: queueUrl ?? databaseUrl,
          GANTRY_MODELS: "noop",
          GANTRY_SLOTS: String(slots),
          GANTRY_THREADS: "1",
          GANTRY_EXECUTION_PROVIDERS: "cpu",
          GANTRY_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? "warn",
        },
        stdio: ["ignore", "ignore", "pipe"],
      });
      children.push(agent);
      await waitForLine(agent, "stderr", /waiting for jobs/);
    },
    async close() {
      for (const child of children.reverse()) await stopChild(child);
      await database.close();
      if (postgres) await dropPostgresSchema(postgres.url, postgres.schema);
      if (queueUrl) {
        await deleteBenchTopology(prefix);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
