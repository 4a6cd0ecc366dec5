import { describe, expect, it, onTestFinished } from "vitest";
import { agentQueueCalls } from "../../gateway/routes/agent-queue.ts";
import { queueMessage } from "../conformance/job-queue.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * A take whose agent went away (its session cut) while the gateway leased messages for it:
 * nothing is claimed, and the messages are ready again at once with their attempt unspent,
 * not held by no one until their lease runs out.
 */
describe("a take cut while it leased", () => {
  it("gives what it leased back to the queue at once", async () => {
    const gw = await startTestGateway({ models: ["noop"] });
    onTestFinished(() => gw.close());
    const stores = gw.gateway.stores.agents;
    const { row } = await stores.create({ name: "cut", source: "admin", now: Date.now() });
    const registration = {
      v: 1 as const,
      models: ["noop"],
      provider: "cpu" as const,
      slots: 1,
    };
    const agent = await stores.register(row.id, registration, Date.now());
    if (!agent) throw new Error("not registered");
    const message = queueMessage("noop");
    await gw.queue.publish(message);

    const take = agentQueueCalls.find((call) => call.path === "/queue/take");
    const cut = new AbortController();
    cut.abort();
    const answer = await take?.handle(
      { gateway: gw.gateway, agent, param: () => "", signal: () => cut.signal },
      { v: 1, agent_id: agent.id, max: 5, wait_ms: 0, claim: true },
    );
    expect(answer).toEqual({ v: 1, deliveries: [] });
    const leases = gw.gateway.queueLeases;
    const again = await leases?.take({ models: ["noop"], max: 5 });
    expect(again?.map((delivery) => [delivery.message.id, delivery.attempt])).toEqual([
      [message.id, 1],
    ]);
  });
});
