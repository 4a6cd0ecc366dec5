import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { afterAll, describe, expect, it } from "vitest";
import { type OpenedDatabase, openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { randomToken } from "../../shared/ids.ts";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import {
  type Accepted,
  checkIntegrity,
  progress,
  waitAllTerminal,
} from "../helpers/fault-checks.ts";
import { faultQueue } from "../helpers/fault-queue.ts";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.ts";
import { freshPostgresUrl } from "../helpers/test-gateway.ts";

/**
 * A gateway SIGKILLed in the middle of its releases (issue 26): two `gantry gateway`
 * processes share Postgres and RabbitMQ with a release window of 4, a flood of submits goes
 * to one of them while an agent drains through the other, and the first is killed while the
 * flood's release passes run. What it left (jobs held, jobs marked released but never
 * published, answers it never sent) is the survivor's to finish: every job the database
 * holds ends, each run to completion once, and the accepted ones with their own output.
 */
const FLOOD = 400;
const KILL_AFTER = 150;

const database = freshPostgresUrl("gantry_release_kill");
const queue = faultQueue("release-kill");
/** RabbitMQ by default, so the outbox is what publishes; GANTRY_FAULT_QUEUE=sql: the database. */
const queueUrl = queue.gatewayQueueUrl ?? database.url;
const apiKey = `gk_live_${randomToken(24)}`;
const agentToken = `gat_${randomToken(24)}`;
const dirs: string[] = [];
const gateways: GatewayProcess[] = [];
let agent: AgentProcess | null = null;
let db: OpenedDatabase | null = null;

afterAll(async () => {
  await agent?.kill();
  for (const gateway of gateways) await gateway.kill();
  await db?.close();
  await dropPostgresSchema(database.url, database.schema);
  await queue.cleanup();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A `gantry gateway` process on the shared database and queue, with a window of 4. */
async function startGateway(): Promise<GatewayProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), "gantry-release-kill-"));
  dirs.push(dataDir);
  const gateway = await startGatewayProcess({
    GANTRY_DATA_DIR: dataDir,
    GANTRY_DATABASE_URL: database.url,
    GANTRY_QUEUE_URL: queueUrl,
    GANTRY_MODELS: "noop",
    GANTRY_API_KEY: apiKey,
    GANTRY_AGENT_TOKEN: agentToken,
    GANTRY_RELEASE_WINDOW: "4",
    GANTRY_SWEEP_SECONDS: "1",
    GANTRY_LEASE_SECONDS: "2",
    GANTRY_MAX_ATTEMPTS: "10",
  });
  gateways.push(gateway);
  return gateway;
}

describe("a gateway killed in the middle of a release", () => {
  it("leaves its held and half-released jobs to the other gateway, none lost or run twice", async () => {
    const say = progress("release-kill");
    const doomed = await startGateway();
    const survivor = await startGateway();
    agent = startAgentProcess({ url: survivor.url, agentToken }, { slots: 4, queueUrl });
    await agent.ready();

    const accepted: Accepted[] = [];
    let killed = false;
    let next = 0;
    const submitter = async () => {
      while (!killed && next < FLOOD) {
        const input = { n: next++, delay_ms: 50 };
        const response = await fetch(`${doomed.url}/v1/jobs`, {
          method: "POST",
          headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "noop", input }),
        }).catch(() => null);
        if (response === null) return; // the gateway is gone: the flood ends
        expect(response.status).toBe(202);
        const job = (await response.json()) as { id: string };
        accepted.push({ id: job.id, input });
        // Killed while submits are still arriving, so release passes are under way.
        if (accepted.length === KILL_AFTER && !killed) {
          killed = true;
          await doomed.kill();
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, submitter));
    expect(killed).toBe(true);

    db = await openDatabase(database.url);
    const left = await db.db
      .selectFrom("jobs")
      .select([
        sql<number>`COUNT(*) FILTER (WHERE status = 'queued' AND released_at IS NULL)`.as("held"),
        sql<number>`COUNT(*) FILTER (WHERE status = 'queued' AND released_at IS NOT NULL
          AND published_at IS NULL)`.as("unpublished"),
        sql<number>`COUNT(*)`.as("all"),
      ])
      .executeTakeFirstOrThrow();
    say(
      `killed after ${accepted.length} answers: ${left.all} jobs committed, ${left.held} held, ${left.unpublished} released but unpublished`,
    );
    // The backlog is far past the window (4): the survivor has held jobs to release.
    expect(Number(left.held)).toBeGreaterThan(0);

    // Every committed job, answered or not, is the survivor's to finish.
    const ids = (await db.db.selectFrom("jobs").select("id").execute()).map((row) => row.id);
    await waitAllTerminal(db.db, ids, { say, timeoutMs: 120_000 }).catch((error: unknown) => {
      throw new Error(`${String(error)}\nagent: ${agent?.stderrTail()}`);
    });
    const report = await checkIntegrity(db.db, accepted);
    say(`accepted: ${JSON.stringify(report)}`);
    expect(report.succeeded).toBe(accepted.length);
    const results = await db.db
      .selectFrom("job_events")
      .select(["job_id", sql<number>`COUNT(*)`.as("n")])
      .where("status", "=", "succeeded")
      .groupBy("job_id")
      .execute();
    expect(results).toHaveLength(ids.length);
    expect(results.filter((row) => Number(row.n) !== 1)).toEqual([]);
  });
});
