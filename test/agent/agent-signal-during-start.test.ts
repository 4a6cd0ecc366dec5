import { afterAll, beforeAll, expect, it } from "vitest";
import { spawnAgentRun } from "../helpers/agent-run.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import { until } from "../helpers/until.ts";

/**
 * A SIGTERM while the agent starts (a supervisor's stop during a model load, or one sent as
 * soon as a line was read): before, the signal came before any handler and killed the
 * process (exit by signal, its runners and registration left behind); it is now kept, and
 * the agent drains and stops as soon as its start is done.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw?.close());

it("a SIGTERM during the start stops the agent once started, cleanly", {
  timeout: 60_000,
}, async () => {
  const agent = spawnAgentRun(gw);
  await until(() => agent.stderr().includes("→ gateway"), 30_000);
  // Its first line: the start has only begun.
  agent.child.kill("SIGTERM");
  const [code, signal] = await agent.exited;
  expect({ code, signal }, agent.stderr()).toEqual({ code: 0, signal: null });
  expect(agent.stderr()).toContain("SIGTERM: stopping as soon as the start is done");
  expect(agent.stderr()).toContain("gantry-agent: stopped");
});
