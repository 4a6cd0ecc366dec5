import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import {
  type Accepted,
  checkIntegrity,
  progress,
  submitNoopJobs,
  waitAllTerminal,
} from "../helpers/fault-checks.ts";
import { type TcpSwitch, tcpSwitch } from "../helpers/tcp-switch.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * Agent sessions cut again and again mid-run: a real `gantry-agent` holding one WebSocket
 * session to a Postgres gateway (no queue URL: its takes, settles, claims, heartbeats and
 * reports all travel on the session) behind a TCP switch that drops every connection while
 * jobs are being claimed and reported, then comes back. The agent reconnects with backoff
 * and sends its unanswered calls again; no accepted job is lost and none records two results.
 */
const JOBS = 180;
const CUTS = 6;

let gw: TestGateway;
let cut: TcpSwitch;
let agent: AgentProcess | null = null;

beforeAll(async () => {
  gw = await startTestGateway({
    database: "postgres",
    models: ["noop"],
    maxAttempts: 10,
    leaseSeconds: 3,
    sweep: { staleAfterMs: 9_000, outboxGraceMs: 2_000 },
  });
  cut = await tcpSwitch();
  await cut.on({ host: "127.0.0.1", port: Number(new URL(gw.url).port) });
});
afterAll(async () => {
  await agent?.kill();
  await cut?.close();
  await gw?.close();
});

describe(`agent sessions cut ${CUTS} times during ${JOBS} jobs`, () => {
  it("finishes every accepted job with exactly one result", async () => {
    const say = progress("session-cut");
    agent = startAgentProcess(
      { url: cut.url, agentToken: gw.agentToken },
      { slots: 2, maxAttempts: 10, leaseSeconds: 3, heartbeatSeconds: 0.5 },
    );
    await agent.ready();
    const accepted: Accepted[] = [];
    const batch = JOBS / CUTS;
    for (let round = 0; round < CUTS; round++) {
      const offset = accepted.length;
      accepted.push(...(await submitNoopJobs(gw, batch, (n) => ({ n: offset + n, delay_ms: 50 }))));
      // Cut while the agent is in the middle of a job: claims, reports and takes in flight.
      await agent.nextRunning();
      say(`cut ${round + 1}/${CUTS} with ${agent.running.size} job(s) running`);
      await cut.off();
      // Down long enough for calls to be cut and retried, shorter than a lease.
      await new Promise((resolve) => setTimeout(resolve, 300 + 200 * (round % 3)));
      await cut.on({ host: "127.0.0.1", port: Number(new URL(gw.url).port) });
    }
    const rest = JOBS - accepted.length;
    if (rest > 0) accepted.push(...(await submitNoopJobs(gw, rest, (n) => ({ n: 1_000 + n }))));
    await waitAllTerminal(
      gw.db,
      accepted.map((job) => job.id),
      { say },
    );
    const report = await checkIntegrity(gw.db, accepted);
    expect(report).toMatchObject({ succeeded: accepted.length, failed: 0, other: 0 });
    // One session per connection: a nonce for each handshake, none per call.
    const { count } = await gw.db
      .selectFrom("agent_nonces")
      .select((eb) => eb.fn.countAll<string>().as("count"))
      .executeTakeFirstOrThrow();
    expect(Number(count)).toBeLessThan(CUTS * 6);
    expect(await agent.stop()).toBe(0);
    agent = null;
    console.info(
      `session-cut: ${CUTS} cuts, ${report.extraClaims} extra claims, ${count} nonces; all ${accepted.length} succeeded once`,
    );
  });
});
