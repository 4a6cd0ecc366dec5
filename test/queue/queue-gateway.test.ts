import { describe, expect, it, onTestFinished } from "vitest";
import { createGatewayClient, type GatewayClient } from "../../gpu-agent/gateway/client.ts";
import { createGatewayQueue } from "../../gpu-agent/gateway/queue.ts";
import type { JobQueue, QueueLimits } from "../../shared/queue/port.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  type JobQueueFixture,
  queueMessage,
} from "../conformance/job-queue.ts";
import { describeRefill } from "../conformance/refill.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * The gateway as the queue: an agent's JobQueue with no queue URL, over a real Node gateway
 * whose queue is `sql` (SQLite here, Postgres in the agent end-to-end test). The gateway
 * publishes, as it does for every job it accepts; the agent's side leases, settles and
 * counts through the signed queue routes. The agent registers the models it consumes first,
 * as a real agent does: the gateway hands out only registered models' messages.
 */
const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 400 };

type Session = "http" | "websocket";
const clients: GatewayClient[] = [];

async function agentClient(gw: TestGateway, name: string, session: Session = "http") {
  const client = createGatewayClient({
    gatewayUrl: gw.url,
    agentId: name,
    token: gw.agentToken,
    session,
  });
  clients.push(client);
  await client.enroll();
  return client;
}

function agentQueue(gw: TestGateway, client: GatewayClient, onError?: (e: unknown) => void) {
  const calls = client.queue;
  if (!calls) throw new Error("the gateway client has no queue calls");
  const adapter = createGatewayQueue(calls, {
    leaseMs: LIMITS.leaseMs,
    waitMs: 2_000,
    ...(onError ? { onError } : {}),
  });
  const models = new Set<string>();
  const queue: JobQueue = {
    publish: (message, options) => gw.queue.publish(message, options),
    async consume(handler, options) {
      for (const model of options.models ?? []) models.add(model);
      await client.register({ models: [...models], provider: "cpu", slots: options.prefetch });
      return adapter.consume(handler, options);
    },
    depth: (model) => adapter.depth(model),
    close: () => adapter.close(),
  };
  return queue;
}

async function gatewayFixture(
  onError?: (error: unknown) => void,
  session: Session = "http",
): Promise<JobQueueFixture> {
  // The sweeper stays out of the way: these messages name no jobs.
  const gw = await startTestGateway({
    leaseSeconds: LIMITS.leaseMs / 1000,
    maxAttempts: LIMITS.maxAttempts,
    sweepIntervalMs: 3_600_000,
  });
  const client = await agentClient(gw, "conformance", session);
  const queue = agentQueue(gw, client, onError);
  return {
    queue,
    limits: LIMITS,
    async cleanup() {
      await queue.close();
      await client.close?.();
      await gw.close();
    },
  };
}

describeJobQueueConformance("the gateway's sql queue, from an agent (signed HTTP)", (onError) =>
  gatewayFixture(onError, "http"),
);
describeJobQueueConformance("the gateway's sql queue, from an agent (session)", (onError) =>
  gatewayFixture(onError, "websocket"),
);
describeRefill("the gateway's sql queue, from an agent (session)", (onError) =>
  gatewayFixture(onError, "websocket"),
);

describe("the gateway's sql queue, from agents", () => {
  it("answers a waiting take as soon as a message is published", async () => {
    const fixture = await gatewayFixture();
    onTestFinished(() => fixture.cleanup());
    const model = freshModel();
    const box = new Inbox(10_000, (d) => d.ack());
    const consumer = await fixture.queue.consume(box.handler, { prefetch: 1, models: [model] });
    const sent = queueMessage(model);
    await fixture.queue.publish(sent);
    expect((await box.nth(1)).message.id).toBe(sent.id);
    await consumer.stop();
  });

  it("hands each message to one of two agents, and only the models each registered", async () => {
    const gw = await startTestGateway({ sweepIntervalMs: 3_600_000 });
    onTestFinished(() => gw.close());
    const [a, b] = [freshModel(), freshModel()];
    const queues = [
      agentQueue(gw, await agentClient(gw, "agent-a")),
      agentQueue(gw, await agentClient(gw, "agent-b")),
    ];
    const boxes = [new Inbox(10_000, (d) => d.ack()), new Inbox(10_000, (d) => d.ack())];
    const consumers = [
      await queues[0]!.consume(boxes[0]!.handler, { prefetch: 4, models: [a] }),
      await queues[1]!.consume(boxes[1]!.handler, { prefetch: 4, models: [a, b] }),
    ];
    for (let i = 0; i < 20; i++) await gw.queue.publish(queueMessage(a));
    for (let i = 0; i < 5; i++) await gw.queue.publish(queueMessage(b));
    await expect
      .poll(() => boxes[0]!.received.length + boxes[1]!.received.length, { timeout: 10_000 })
      .toBe(25);
    const all = boxes.flatMap((box) => box.received.map((d) => d.message.id));
    expect(new Set(all).size).toBe(25);
    expect(boxes[0]!.received.every((d) => d.message.model === a)).toBe(true);
    await Promise.all(consumers.map((consumer) => consumer.stop()));
    await Promise.all(queues.map((queue) => queue.close()));
    await Promise.all(clients.splice(0).map((client) => client.close?.()));
  });

  it("refuses a take by an agent that registered none of the models", async () => {
    const gw = await startTestGateway({ sweepIntervalMs: 3_600_000 });
    onTestFinished(() => gw.close());
    const client = await agentClient(gw, "unregistered");
    await expect(client.queue?.take({ max: 1, wait_ms: 0 })).rejects.toMatchObject({
      code: "model_not_registered",
    });
  });
});
