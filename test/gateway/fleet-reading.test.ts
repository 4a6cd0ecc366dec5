import { afterAll, beforeAll, expect, it } from "vitest";
import { enrollHandAgent } from "../helpers/signed-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * Every start of an enrolled agent makes a new agent row (its credentials live in memory):
 * a Kubernetes pod KEDA scales up, a rollout, a crash-looping pod. The gateway's fleet
 * readings (a model's live agents, a queued job's reason, the release window) read the 500
 * newest rows by id, so once 500 agents had enrolled since a live agent did, that agent
 * vanished from them while it still ran jobs: GET /v1/models/noop said `agents: 0`. They
 * now read the agents heard from last.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw?.close());

it("counts a live agent however many agents enrolled after it", async () => {
  const longLived = await enrollHandAgent(gw.url, gw.agentToken, { name: "box-1" });
  expect((await longLived.register(["noop"])).status).toBe(200);
  // The churn since: pods that enrolled and stopped (or never got as far as registering).
  const later = gw.gateway.now() + 1;
  for (let n = 0; n < 510; n++) {
    await gw.gateway.stores.agents.create({ source: "enrollment", now: later + n });
  }
  // Past the fleet reading's period, so it is read afresh.
  await new Promise((resolve) => setTimeout(resolve, gw.gateway.config.queueDepthCacheMs + 50));
  const response = await gw.api("/v1/models/noop");
  expect(response.status).toBe(200);
  const { state } = (await response.json()) as { state: { agents: number } };
  expect(state.agents).toBe(1);
});
