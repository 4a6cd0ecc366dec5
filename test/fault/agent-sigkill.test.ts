import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import {
  type Accepted,
  checkIntegrity,
  progress,
  submitNoopJobs,
  waitAllTerminal,
} from "../helpers/fault-checks.ts";
import { type FaultQueue, faultQueue } from "../helpers/fault-queue.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * The agent supervisor SIGKILLed mid-job, again and again, during a run of hundreds of
 * jobs: no drain, no release, no goodbye. The queue gives the in-flight messages back
 * (lease end on `sql`, connection loss on `amqp`), the restarted agent's claims take the
 * orphaned attempts over, and the sweeper requeues whatever the queue did not.
 */
const JOBS = 300;
const KILLS = 5;

let gw: TestGateway;
let queue: FaultQueue;
let queueUrl: string;
let agent: AgentProcess | null = null;
/** Every agent started, so a failed run leaves no process behind. */
const spawned: AgentProcess[] = [];

beforeAll(async () => {
  queue = faultQueue("sigkill");
  gw = await startTestGateway({
    database: "postgres",
    queueUrl: queue.gatewayQueueUrl,
    models: ["noop"],
    maxAttempts: 10,
    leaseSeconds: 2,
    sweepIntervalMs: 500,
    sweep: { staleAfterMs: 6_000, outboxGraceMs: 2_000 },
  });
  queueUrl = queue.agentQueueUrl(gw);
});
afterAll(async () => {
  await Promise.all(spawned.map((process) => process.kill()));
  await gw?.close();
  await queue?.cleanup();
});

describe(`agent supervisor SIGKILLed ${KILLS} times during ${JOBS} jobs`, () => {
  it("finishes every accepted job with exactly one result", async () => {
    const say = progress("sigkill");
    const batch = JOBS / (KILLS + 1);
    const accepted: Accepted[] = [];
    const submit = async () => {
      const offset = accepted.length;
      const jobs = await submitNoopJobs(gw, batch, (n) => ({ delay_ms: 100, n: offset + n }));
      accepted.push(...jobs);
    };
    const start = () => {
      const started = startAgentProcess(gw, { queueUrl, slots: 2, maxAttempts: 10 });
      spawned.push(started);
      return started;
    };
    agent = start();
    await agent.ready();
    let inFlightAtKills = 0;
    for (let kill = 0; kill < KILLS; kill++) {
      // A successor joins first (starting an agent takes seconds on this machine), then a
      // batch arrives, and the current agent dies the moment it has just started a job.
      const successor = start();
      await successor.ready();
      await submit();
      await agent.nextRunning();
      inFlightAtKills += agent.running.size;
      say(
        `kill ${kill + 1}/${KILLS}: SIGKILL agent ${agent.pid} with ${agent.running.size} job(s) running`,
      );
      await agent.kill();
      agent = successor;
    }
    await submit();
    expect(inFlightAtKills).toBeGreaterThanOrEqual(KILLS);
    await waitAllTerminal(
      gw.db,
      accepted.map((job) => job.id),
      { say },
    );
    expect(await agent.stop()).toBe(0);
    agent = null;

    const report = await checkIntegrity(gw.db, accepted);
    expect(accepted).toHaveLength(JOBS);
    // Attempts to spare: no job can have been hit by all the kills, so every one succeeds.
    expect(report).toMatchObject({ succeeded: JOBS, failed: 0, other: 0 });
    expect(report.extraClaims).toBeGreaterThanOrEqual(KILLS);
    console.info(
      `sigkill (${queue.kind}): ${inFlightAtKills} jobs in flight across ${KILLS} kills; ${report.extraClaims} extra claims; all ${JOBS} succeeded once`,
    );
  });
});
