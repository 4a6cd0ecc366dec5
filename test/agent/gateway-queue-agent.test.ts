import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import {
  type Accepted,
  checkIntegrity,
  submitNoopJobs,
  waitAllTerminal,
} from "../helpers/fault-checks.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An agent that holds only the gateway's URL and its own id and secret: no queue URL, no
 * database URL, and (the default on a Node gateway) one session for all its calls. Its gateway keeps jobs and the `sql` queue in Postgres and serves the queue
 * to it (gateway/routes/agent-queue.ts). Jobs succeed once each, a transient failure is
 * retried by the queue, a permanent one is dead-lettered at once, and a SIGKILLed agent's
 * jobs come back to its successor when their leases run out.
 */
let gw: TestGateway;
const spawned: AgentProcess[] = [];
let credentials: { agentId: string; secret: string };

beforeAll(async () => {
  gw = await startTestGateway({
    database: "postgres",
    models: ["noop"],
    maxAttempts: 3,
    leaseSeconds: 2,
  });
  const { row, secret } = await gw.gateway.stores.agents.create({
    name: "rented-gpu",
    source: "admin",
    now: Date.now(),
  });
  credentials = { agentId: row.id, secret };
});
afterAll(async () => {
  await Promise.all(spawned.map((agent) => agent.kill()));
  await gw?.close();
});

const start = () => {
  const agent = startAgentProcess(gw, { credentials, slots: 2, maxAttempts: 3 });
  spawned.push(agent);
  return agent;
};

const statusOf = async (id: string) => {
  const response = await gw.api(`/v1/jobs/${id}`);
  return (await response.json()) as { status: string; attempt: number; error?: { code: string } };
};

describe("an agent without a queue URL, on a Postgres gateway", () => {
  it("takes its jobs from the gateway: each succeeds once, failures retry or dead-letter", async () => {
    const agent = start();
    await agent.ready();
    const accepted = await submitNoopJobs(gw, 40, (n) => ({ n }));
    const [transient] = await submitNoopJobs(gw, 1, () => ({ fail: "transient" }));
    const [permanent] = await submitNoopJobs(gw, 1, () => ({ fail: "permanent" }));
    await waitAllTerminal(
      gw.db,
      [...accepted, transient!, permanent!].map((job) => job.id),
    );
    expect(await checkIntegrity(gw.db, accepted)).toMatchObject({ succeeded: 40, failed: 0 });
    expect(await statusOf(transient!.id)).toMatchObject({ status: "failed", attempt: 3 });
    expect(await statusOf(permanent!.id)).toMatchObject({ status: "failed", attempt: 1 });
    // The queue kept nothing live: every message acked or dead-lettered.
    expect(await gw.queue.depth("noop")).toMatchObject({ ready: 0, inFlight: 0, delayed: 0 });
    // Its session (GANTRY_AGENT_SESSION=auto on a Node gateway) was signed once: a nonce row
    // for the handshake, none per claim, report or take (signed HTTP writes one per call).
    const { count } = await gw.db
      .selectFrom("agent_nonces")
      .select((eb) => eb.fn.countAll<string>().as("count"))
      .where("agent_id", "=", credentials.agentId)
      .executeTakeFirstOrThrow();
    expect(Number(count)).toBeLessThanOrEqual(2);
    expect(await agent.stop()).toBe(0);
  });

  it("gives a SIGKILLed agent's jobs to the next agent when their leases run out", async () => {
    const first = start();
    await first.ready();
    const accepted: Accepted[] = await submitNoopJobs(gw, 20, (n) => ({ n, delay_ms: 300 }));
    await first.nextRunning();
    await first.kill();
    const second = start();
    await second.ready();
    await waitAllTerminal(
      gw.db,
      accepted.map((job) => job.id),
    );
    const report = await checkIntegrity(gw.db, accepted);
    expect(report).toMatchObject({ succeeded: 20, failed: 0, other: 0 });
    expect(report.extraClaims).toBeGreaterThanOrEqual(1);
    expect(await second.stop()).toBe(0);
  });
});
