import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A running job canceled and retried at once goes back to the same agent, whose canceled run
 * goes on (a device call cannot be interrupted). A retry starts the attempts again, so both
 * runs are attempt 1 of the same agent: the old run's report must not end the new life.
 */
let gw: TestGateway;
let agent: AgentHandle;

beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"], slots: 2, executionProviders: "cpu" });
});
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

interface JobView {
  status: string;
  attempt: number;
  started_at: string | null;
  finished_at: string | null;
}

const jobOf = async (id: string) => (await (await gw.api(`/v1/jobs/${id}`)).json()) as JobView;

async function until(id: string, done: (job: JobView) => boolean): Promise<JobView> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const job = await jobOf(id);
    if (done(job) || Date.now() > deadline) return job;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe("a running job canceled then retried", () => {
  it("ends with its new run's result, not the canceled run's", async () => {
    const delayMs = 2_500;
    const submitted = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { delay_ms: delayMs } },
    });
    const { id } = (await submitted.json()) as { id: string };
    await until(id, (job) => job.status === "running");
    // Long enough into the first run that its end falls well inside the second one.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await gw.api(`/v1/jobs/${id}/cancel`, { method: "POST" })).status).toBe(200);
    expect((await gw.api(`/v1/jobs/${id}/retry`, { method: "POST" })).status).toBe(202);

    const ended = await until(id, (job) => !["queued", "running"].includes(job.status));
    expect(ended).toMatchObject({ status: "succeeded", attempt: 1 });
    // The recorded run is the retried one: it slept its whole delay after it started.
    const ranMs = Date.parse(ended.finished_at ?? "") - Date.parse(ended.started_at ?? "");
    expect(ranMs).toBeGreaterThanOrEqual(delayMs);
  });
});
