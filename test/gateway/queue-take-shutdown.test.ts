import { describe, expect, it, onTestFinished } from "vitest";
import { createGatewayClient, type GatewayClient } from "../../gpu-agent/gateway/client.ts";
import type { QueueDelivery } from "../../shared/protocol/index.ts";
import { queueMessage } from "../conformance/job-queue.ts";
import { openTestDatabase, startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * Takes waiting at a gateway that stops (SIGTERM: `NodeGateway.close`). Each is answered
 * before its agent's connection goes, with what it leased or with none, and what it leased
 * and did not hand over is back in the queue, its attempt unspent, before the gateway closes
 * its database: nothing is left leased to an answer no agent got.
 */
type Transport = "http" | "websocket";

async function rig(session: Transport, agents: number) {
  // The gateway's database outlives it here, to be read after its close.
  const database = await openTestDatabase("postgres");
  onTestFinished(() => database.close());
  const gw = await startTestGateway({
    database: { url: database.url },
    models: ["noop"],
    leaseSeconds: 60,
    sweepIntervalMs: 3_600_000,
  });
  let closed = false;
  onTestFinished(async () => {
    if (!closed) await gw.close();
  });
  const clients: GatewayClient[] = [];
  for (let i = 0; i < agents; i++) {
    const client = createGatewayClient({
      gatewayUrl: gw.url,
      agentId: `stop-${i}`,
      token: gw.agentToken,
      session,
      tries: 1,
    });
    onTestFinished(() => client.close?.());
    await client.enroll();
    await client.register({ models: ["noop"], provider: "cpu", slots: 4 });
    clients.push(client);
  }
  const close = async (gateway: TestGateway) => {
    closed = true;
    await gateway.close();
  };
  return { gw, clients, database, close };
}

/** Each client's one take, waiting up to 20 s; a failed or cut one counts as none. */
function takeOnce(clients: GatewayClient[], cut: AbortSignal) {
  return clients.map((client) =>
    (client.queue?.take({ max: 4, wait_ms: 20_000 }, cut) ?? Promise.resolve([])).then(
      (deliveries) => ({ answered: true, deliveries }),
      () => ({ answered: false, deliveries: [] as QueueDelivery[] }),
    ),
  );
}

/** Until every take waits at the gateway: each has made its first look by then. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

describe.each(["http", "websocket"] as const)("takes over %s at a stopping gateway", (session) => {
  it("are answered, and leave nothing leased that no agent received", async () => {
    const { gw, clients, database, close } = await rig(session, 4);
    // Ends only a take the gateway never answered (the failure this test looks for).
    const cut = new AbortController();
    const takes = takeOnce(clients, cut.signal);
    await settle();
    // Published as the gateway stops: handed to the waiting takes while they are cut short.
    const publishes = Array.from({ length: 12 }, () =>
      gw.queue.publish(queueMessage("noop")).then(
        () => true,
        () => false,
      ),
    );
    await close(gw);
    const timer = setTimeout(() => cut.abort(), 5_000);
    const answers = await Promise.all(takes);
    clearTimeout(timer);
    await Promise.all(publishes);

    expect(answers.map((answer) => answer.answered)).toEqual(clients.map(() => true));
    const received = new Set(answers.flatMap((a) => a.deliveries.map((d) => d.receipt)));
    const leased = await database.db
      .selectFrom("queue_messages")
      .select(["seq", "lease_token", "attempts"])
      .where("lease_token", "is not", null)
      .execute();
    expect(leased.map((row) => `${row.seq}.${row.lease_token}`).sort()).toEqual(
      [...received].sort(),
    );
    // What was given back has its attempt unspent.
    const waiting = await database.db
      .selectFrom("queue_messages")
      .select("attempts")
      .where("lease_token", "is", null)
      .execute();
    expect(waiting.map((row) => row.attempts)).toEqual(waiting.map(() => 0));
  });
});
