import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { randomToken } from "../../shared/ids.ts";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import {
  type Accepted,
  checkIntegrity,
  progress,
  submitNoopJobs,
  waitAllTerminal,
} from "../helpers/fault-checks.ts";
import { freePort } from "../helpers/fault-own-broker.ts";
import { type GatewayProcess, startGatewayProcess } from "../helpers/gateway-process.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * A gateway restarted with SIGTERM again and again (a deploy) while two `gantry-agent`
 * processes without a queue URL take its `sql` queue's jobs through it, one on a session and
 * one on signed HTTP requests. A stop drains: the agents' takes are answered, what a take had
 * leased goes back unspent, the calls in flight are answered before the sessions close. So
 * the restarts, each far shorter than a lease, lose no job, run none twice, and spend no
 * attempt: every job succeeds at its first.
 */
const JOBS = 160;
const RESTARTS = 4;
const LEASE_SECONDS = 20;

const apiKey = `gk_live_${randomToken(24)}`;
const agentToken = `gat_${randomToken(24)}`;
const dataDir = mkdtempSync(join(tmpdir(), "gantry-sigterm-takes-"));
const agents: AgentProcess[] = [];
let gateway: GatewayProcess | null = null;
let cleanup: (() => Promise<void>) | null = null;

afterAll(async () => {
  await Promise.all(agents.map((agent) => agent.kill()));
  await gateway?.kill();
  await cleanup?.();
  rmSync(dataDir, { recursive: true, force: true });
});

describe(`a gateway stopped with SIGTERM ${RESTARTS} times while agents take its jobs`, () => {
  it("finishes every job once, each at its first attempt", async () => {
    const say = progress("sigterm-takes");
    const database = await openTestDatabase("postgres");
    cleanup = () => database.close();
    const port = await freePort();
    const start = () =>
      startGatewayProcess(
        {
          GANTRY_DATA_DIR: dataDir,
          GANTRY_DATABASE_URL: database.url,
          GANTRY_MODELS: "noop",
          GANTRY_API_KEY: apiKey,
          GANTRY_AGENT_TOKEN: agentToken,
          GANTRY_SWEEP_SECONDS: "1",
          GANTRY_LEASE_SECONDS: String(LEASE_SECONDS),
          GANTRY_MAX_ATTEMPTS: "5",
        },
        port,
      );
    gateway = await start();
    const target = { url: gateway.url, agentToken };
    const options = { slots: 2, maxAttempts: 5, leaseSeconds: LEASE_SECONDS };
    agents.push(startAgentProcess(target, options));
    agents.push(startAgentProcess(target, { ...options, env: { GANTRY_AGENT_SESSION: "http" } }));
    await Promise.all(agents.map((agent) => agent.ready()));

    const api = {
      api: (path: string, init: RequestInit & { json?: unknown } = {}) =>
        fetch(`${target.url}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
          body: JSON.stringify(init.json),
        }),
    };
    const accepted: Accepted[] = [];
    const batch = JOBS / (RESTARTS + 1);
    for (let round = 0; round <= RESTARTS; round++) {
      const offset = accepted.length;
      accepted.push(
        ...(await submitNoopJobs(api, batch, (n) => ({ n: offset + n, delay_ms: 40 }))),
      );
      if (round === RESTARTS) break;
      // Stopped while the agents are mid-job: takes waiting, claims, reports in flight.
      await Promise.race(agents.map((agent) => agent.nextRunning()));
      say(`SIGTERM ${round + 1}/${RESTARTS}`);
      await gateway.stop();
      gateway = await start();
    }
    await waitAllTerminal(
      database.db,
      accepted.map((job) => job.id),
      { say },
    );
    const report = await checkIntegrity(database.db, accepted);
    expect(report).toMatchObject({ succeeded: accepted.length, failed: 0, other: 0 });
    const later = await database.db
      .selectFrom("jobs")
      .select(["id", "attempt"])
      .where("attempt", ">", 1)
      .execute();
    expect(later).toEqual([]);
    say(`all ${accepted.length} succeeded once, at their first attempt`);
  });
});
