import { describe, expect, it, onTestFinished } from "vitest";
import type { SupervisorEvent } from "../../gpu-agent/supervisor/index.ts";
import { submitNoopJobs } from "../helpers/fault-checks.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";
import { until } from "../helpers/until.ts";

/**
 * Jobs an agent claimed ahead of its runners (its look-ahead) and that are canceled while
 * they wait for a runner leave the agent at its next heartbeat, unrun: an operations team
 * cancelling a batch must not have the agent spend its device on every job it had read ahead.
 * (A job already handed to a runner, running or queued inside it behind the one running,
 * cannot be withdrawn; it runs, and its result is refused.)
 */
describe("canceled jobs waiting in an agent's look-ahead", () => {
  it("leave the agent at its next heartbeat without running", async () => {
    const gw = await startTestGateway({ models: ["noop"] });
    onTestFinished(() => gw.close());
    const agent = await startTestAgent(gw, {
      models: ["noop"],
      slots: 1,
      lookahead: 5,
      heartbeatSeconds: 1,
      executionProviders: "cpu",
    });
    onTestFinished(() => agent.stop());
    const events: SupervisorEvent[] = [];
    agent.supervisor.on((event) => events.push(event));

    const [long] = await submitNoopJobs(gw, 1, () => ({ delay_ms: 6_000 }));
    const waiting = await submitNoopJobs(gw, 4, () => ({ delay_ms: 10 }), { concurrency: 1 });
    const waitingIds = new Set(waiting.map((job) => job.id));
    // Claimed by the agent, behind the long job in its one runner.
    await until(
      () => events.filter((e) => e.type === "claimed" && waitingIds.has(e.jobId)).length === 4,
    );
    expect(events.some((e) => e.type === "running" && e.jobId === long?.id)).toBe(true);

    // The runner takes the next job ahead of the one it runs; the rest wait in the agent.
    const inRunner = new Set(
      events.flatMap((e) => (e.type === "running" && waitingIds.has(e.jobId) ? [e.jobId] : [])),
    );
    expect(inRunner.size).toBeLessThanOrEqual(1);
    const inAgent = new Set([...waitingIds].filter((id) => !inRunner.has(id)));

    for (const job of waiting) {
      const response = await gw.api(`/v1/jobs/${job.id}/cancel`, { method: "POST" });
      expect(response.status).toBe(200);
    }
    const settledInAgent = () => events.filter((e) => e.type === "settled" && inAgent.has(e.jobId));
    await until(() => settledInAgent().length === inAgent.size);
    // Gone while the long job still runs, none of them run, their messages acked.
    expect(events.some((e) => e.type === "settled" && e.jobId === long?.id)).toBe(false);
    expect(events.some((e) => e.type === "running" && inAgent.has(e.jobId))).toBe(false);
    expect(settledInAgent().map((e) => e.type === "settled" && e.outcome)).toEqual(
      [...inAgent].map(() => "refused"),
    );
  }, 20_000);
});
