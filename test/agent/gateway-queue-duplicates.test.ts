import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import { checkIntegrity, submitNoopJobs, waitAllTerminal } from "../helpers/fault-checks.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A resume publishes every queued job of the model again, so a job whose message survived the
 * pause has two (gateway/store/model-switches.ts: "agents tolerate" the second). An agent on
 * the gateway's `sql` queue takes both in one take, and the gateway claims both: the first
 * claim wins, the second is refused. The agent must run the job on the claim that won, not
 * let the duplicate's refusal strand it as `running` with no one running it until its lease
 * runs out (a minute and a half, and one attempt, lost).
 */
let gw: TestGateway;
let agent: AgentProcess | undefined;

beforeAll(async () => {
  // The gateway's lease is long, so a stranded job stays stranded past the test's wait.
  gw = await startTestGateway({ models: ["noop"], leaseSeconds: 60 });
});
afterAll(async () => {
  await agent?.kill();
  await gw?.close();
});

describe("an agent on the gateway's queue, after a model's pause and resume", () => {
  it("runs each job once, at its first attempt, though each has two messages", async () => {
    const accepted = await submitNoopJobs(gw, 4, (n) => ({ n }));
    const admin = (action: string) =>
      gw.api(`/v1/admin/models/noop/${action}`, { method: "POST", json: {} });
    expect((await admin("pause")).status).toBe(200);
    const resumed = (await (await admin("resume")).json()) as { republished: number };
    expect(resumed.republished).toBe(4);
    expect((await gw.queue.depth("noop")).ready).toBe(8);

    agent = startAgentProcess(gw, { slots: 4, leaseSeconds: 60, heartbeatSeconds: 5 });
    await agent.ready();
    await waitAllTerminal(
      gw.db,
      accepted.map((job) => job.id),
      { timeoutMs: 15_000 },
    );
    expect(await checkIntegrity(gw.db, accepted)).toMatchObject({ succeeded: 4, failed: 0 });
    for (const { id } of accepted) {
      const job = (await (await gw.api(`/v1/jobs/${id}`)).json()) as { attempt: number };
      expect(job.attempt).toBe(1);
    }
    // The duplicates were acked, not left to come back.
    await expect
      .poll(() => gw.queue.depth("noop"), { timeout: 5_000 })
      .toMatchObject({ ready: 0, inFlight: 0, delayed: 0 });
  });
});
