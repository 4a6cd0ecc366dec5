import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { afterAll, describe, expect, it } from "vitest";
import { type OpenedDatabase, openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { randomToken } from "../../shared/ids.ts";
import type { JobList, UsageReport } from "../../shared/protocol/index.ts";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import { countTerminal, progress, waitAllTerminal } from "../helpers/fault-checks.ts";
import { freePort } from "../helpers/fault-own-broker.ts";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.ts";
import { freshPostgresUrl } from "../helpers/test-gateway.ts";

/**
 * Usage stays exact across gateway kills: a `gantry gateway` process on Postgres is
 * SIGKILLed twice while a real agent runs noop jobs through it (reports in flight, the
 * agent holding them through the outage), and started again on the same port. Every run
 * recorded is rolled up in the statement that recorded it, so the usage over the period is
 * the sum of the jobs' `gpu_ms`, billed and wasted alike, to the millisecond.
 */
const JOBS = 60;

const database = freshPostgresUrl("gantry_usage_kill");
const apiKey = `gk_live_${randomToken(24)}`;
const agentToken = `gat_${randomToken(24)}`;
const dataDir = mkdtempSync(join(tmpdir(), "gantry-usage-kill-"));
let gateway: GatewayProcess | null = null;
let agent: AgentProcess | null = null;
let db: OpenedDatabase | null = null;

afterAll(async () => {
  await agent?.kill();
  await killGateway();
  await db?.close();
  await dropPostgresSchema(database.url, database.schema);
  rmSync(dataDir, { recursive: true, force: true });
});

/** `gantry gateway` on `port`, the same database and data directory each time. */
async function startGateway(port: number): Promise<void> {
  gateway = await startGatewayProcess(
    {
      GANTRY_DATA_DIR: dataDir,
      GANTRY_DATABASE_URL: database.url,
      GANTRY_MODELS: "noop",
      GANTRY_API_KEY: apiKey,
      GANTRY_AGENT_TOKEN: agentToken,
      GANTRY_LEASE_SECONDS: "2",
      GANTRY_MAX_ATTEMPTS: "10",
    },
    port,
  );
}

async function killGateway(): Promise<void> {
  await gateway?.kill();
  gateway = null;
}

describe("usage across gateway kills", () => {
  it("sums to the jobs' gpu_ms after two SIGKILLs of the gateway mid-run", async () => {
    const say = progress("usage-kill");
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    await startGateway(port);
    const api = (path: string, init: RequestInit = {}) =>
      fetch(`${url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      });
    // The sql queue in the same database: the agent keeps its deliveries while the gateway
    // is down, and holds its reports until one answers again.
    agent = startAgentProcess({ url, agentToken }, { slots: 2, queueUrl: database.url });
    await agent.ready();
    const ids: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const response = await api("/v1/jobs", {
        method: "POST",
        body: JSON.stringify({ model: "noop", input: { delay_ms: 100 + (i % 5) * 50 } }),
      });
      expect(response.status).toBe(202);
      ids.push(((await response.json()) as { id: string }).id);
    }
    db = await openDatabase(database.url);
    const opened = db;
    for (const round of [1, 2]) {
      // Killed a third and two thirds of the way, while runs are on the device: their
      // reports meet a dead gateway.
      await expect
        .poll(() => countTerminal(opened.db, ids), { timeout: 120_000, interval: 100 })
        .toBeGreaterThanOrEqual((JOBS * round) / 3);
      await killGateway();
      say(`gateway killed (${round}); starting another on the same port`);
      await startGateway(port);
    }
    await waitAllTerminal(db.db, ids, { say, timeoutMs: 150_000 }).catch((error: unknown) => {
      throw new Error(`${String(error)}\nagent: ${agent?.stderrTail()}`);
    });

    const jobs = await db.db
      .selectFrom("jobs")
      .select([
        sql<number>`CAST(SUM(gpu_ms) AS bigint)`.as("gpu"),
        sql<number>`CAST(SUM(wasted_gpu_ms) AS bigint)`.as("wasted"),
        sql<number>`CAST(SUM(billed_runs) AS bigint)`.as("runs"),
      ])
      .where("id", "in", ids)
      .executeTakeFirstOrThrow();
    const report = (await (await api("/v1/usage")).json()) as UsageReport;
    const [total] = report.data;
    say(`usage: ${JSON.stringify(total)}; jobs: ${JSON.stringify(jobs)}`);
    expect(Number(jobs.gpu)).toBeGreaterThan(0);
    expect(total).toEqual({
      jobs: Number(jobs.runs),
      gpu_seconds: Number(jobs.gpu) / 1000,
      wasted_gpu_seconds: Number(jobs.wasted) / 1000,
    });
    // The same through the API: each job's metrics.gpu_ms, summed.
    const list = (await (await api("/v1/jobs?limit=100")).json()) as JobList;
    const listed = list.data.reduce((sum, job) => sum + (job.metrics?.gpu_ms ?? 0), 0);
    expect(listed).toBe(Number(jobs.gpu));
    expect(list.data.filter((job) => job.status === "succeeded")).toHaveLength(JOBS);
  });
});
