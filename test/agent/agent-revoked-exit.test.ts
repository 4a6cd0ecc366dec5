import { afterAll, beforeAll, expect, it } from "vitest";
import { spawnAgentRun } from "../helpers/agent-run.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";
import { until } from "../helpers/until.ts";

/**
 * An operator revokes an enrolled agent (`gantry agents revoke`, a box to take out of the
 * fleet): the agent stopped with exit 1, which the systemd unit restarts (Restart=on-failure
 * spares only exit 2), and the new process enrolled again with the fleet's token: the box
 * was back taking jobs 5 s later under a new id. A revoked agent now exits 2, as for a
 * setting only the operator can change.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw?.close());

it("exits 2 once revoked, so its service manager does not start it to enroll again", {
  timeout: 60_000,
}, async () => {
  const agent = spawnAgentRun(gw, { GANTRY_HEARTBEAT_INTERVAL_SECONDS: "1" });
  try {
    await until(() => agent.stderr().includes("waiting for jobs"), 30_000);
    const id = /enrolled with the gateway as (agt_\w+)/.exec(agent.stderr())?.[1];
    expect(id, agent.stderr()).toBeDefined();
    await gw.gateway.stores.agents.revoke(id!, gw.gateway.now());
    const [code] = await agent.exited;
    expect(code, agent.stderr()).toBe(2);
    expect(agent.stderr()).toContain("revoked by the gateway");
  } finally {
    agent.kill();
  }
});
