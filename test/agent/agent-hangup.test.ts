import { afterAll, beforeAll, expect, it } from "vitest";
import { spawnAgentRun } from "../helpers/agent-run.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import { until } from "../helpers/until.ts";

/**
 * An operator who runs `gantry-agent run` in an SSH session and loses the connection (or
 * closes the terminal): the terminal hangs up its whole process group with SIGHUP. The agent
 * had no handler for it, so Node's default killed it, and its runners with it: the job in
 * flight was lost until its lease ran out and the agent stayed listed as live for three
 * missed beats. A hangup now drains as SIGTERM does, and the runners wait to be told.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw?.close());

it("a hangup of the agent's process group drains its job and stops it cleanly", {
  timeout: 60_000,
}, async () => {
  // Its own process group, as a terminal's session: the hangup reaches the runners too.
  const agent = spawnAgentRun(gw, {}, { detached: true });
  try {
    await until(() => agent.stderr().includes("waiting for jobs"), 30_000);
    const submitted = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { delay_ms: 1_500 } },
    });
    expect(submitted.status, await submitted.clone().text()).toBe(202);
    const { id } = (await submitted.json()) as { id: string };
    await until(() => agent.stdout().includes(id) && agent.stdout().includes('"batch"'), 20_000);

    process.kill(-agent.child.pid!, "SIGHUP");
    const [code, signal] = await agent.exited;
    expect({ code, signal }, agent.stderr()).toEqual({ code: 0, signal: null });
    expect(agent.stderr()).toContain("SIGHUP: draining 1 in-flight job(s)");
    const job = (await (await gw.api(`/v1/jobs/${id}`)).json()) as { status: string };
    expect(job.status).toBe("succeeded");
  } finally {
    const { child } = agent;
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGKILL");
  }
});
