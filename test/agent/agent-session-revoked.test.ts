import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentProcess, startAgentProcess } from "../helpers/fault-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An agent revoked while its session (GANTRY_AGENT_SESSION=auto on a Node gateway) is open:
 * every call on the session is then answered 401 agent_revoked, and the agent must stop and
 * say so, as it does when a signed HTTP request is refused, not take from the queue again and
 * again, logging "queue error … HTTP 401 agent_revoked" for ever.
 */
let gw: TestGateway;
let agent: AgentProcess | undefined;

beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(async () => {
  await agent?.kill();
  await gw?.close();
});

describe("an agent revoked while its session is open", () => {
  it("stops and says it was revoked", { timeout: 60_000 }, async () => {
    const { row, secret } = await gw.gateway.stores.agents.create({
      name: "rented-gpu",
      source: "admin",
      now: Date.now(),
    });
    agent = startAgentProcess(gw, {
      credentials: { agentId: row.id, secret },
      leaseSeconds: 60,
      heartbeatSeconds: 1,
    });
    await agent.ready();
    const revoked = await gw.api(`/v1/admin/agents/${row.id}/revoke`, { method: "POST" });
    expect(revoked.status).toBe(200);
    // It exits on its own: no job ran, so the next "running" never comes.
    await expect(agent.nextRunning()).rejects.toThrow(/agent exited/);
    expect(agent.stderrTail()).toContain(`the gateway revoked agent ${row.id}`);
  });
});
