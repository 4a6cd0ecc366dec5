import { describe, expect, it, onTestFinished } from "vitest";
import { createGatewayClient, type GatewayClient } from "../../gpu-agent/gateway/client.ts";
import { createGatewayQueue } from "../../gpu-agent/gateway/queue.ts";
import type { QueueDelivery } from "../../shared/protocol/index.ts";
import type { JobQueue, QueueLimits } from "../../shared/queue/port.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  type JobQueueFixture,
  queueMessage,
} from "../conformance/job-queue.ts";
import { describeRefill } from "../conformance/refill.ts";
import { submitNoopJobs } from "../helpers/fault-checks.ts";
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

/** A gateway with two noop jobs, both taken by one registered agent's client. */
async function twoTaken(name: string) {
  const gw = await startTestGateway({ models: ["noop"], sweepIntervalMs: 3_600_000 });
  onTestFinished(() => gw.close());
  const client = await agentClient(gw, name);
  onTestFinished(() => client.close?.());
  await client.register({ models: ["noop"], provider: "cpu", slots: 1 });
  const [first, second] = await submitNoopJobs(gw, 2, (n) => ({ n }));
  const taken: QueueDelivery[] = [];
  while (taken.length < 2) {
    taken.push(...((await client.queue?.take({ max: 2, wait_ms: 2_000 })) ?? []));
  }
  const delivery = (id: string | undefined) => taken.find((d) => d.message.id === id)!;
  return { gw, client, first: first!, second: second!, delivery };
}

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

  it("acks a delivery with its success's report, only while the lease holds", async () => {
    const { gw, client, first, second, delivery } = await twoTaken("reporter");
    const succeed = async (id: string, receipt: string) => {
      const { attempt } = delivery(id);
      expect(await client.claim(id, attempt)).toMatchObject({ ok: true });
      return client.report(id, { type: "succeeded", attempt, output: {}, ack_receipt: receipt });
    };

    // The first's own receipt: recorded and acked in one call, its message gone.
    const own = delivery(first.id).receipt;
    expect(await succeed(first.id, own)).toMatchObject({ status: "succeeded", acked: true });
    expect(await gw.queue.depth("noop")).toMatchObject({ ready: 0, inFlight: 1 });
    // Said again (a lost answer): recorded already, and the lease is gone.
    const again = await client.report(first.id, {
      type: "succeeded",
      attempt: delivery(first.id).attempt,
      output: {},
      ack_receipt: own,
    });
    expect(again).toMatchObject({ status: "succeeded", acked: false });
    // A receipt whose lease is not the one given (another delivery's token) acks nothing.
    const stale = delivery(second.id).receipt.replace(
      /\.(.)/,
      (_, c) => `.${c === "A" ? "B" : "A"}`,
    );
    expect(await succeed(second.id, stale)).toMatchObject({ status: "succeeded", acked: false });
    expect(await gw.queue.depth("noop")).toMatchObject({ ready: 0, inFlight: 1 });
    // A receipt that is no receipt is refused with the whole report, as any malformed field.
    const report = { type: "succeeded" as const, attempt: 1, output: {}, ack_receipt: "1.a/b" };
    await expect(client.report(second.id, report)).rejects.toMatchObject({ status: 422 });
  });

  it("claims the jobs it hands out with the take, for the agent's claims to find", async () => {
    const { gw, client, first, second, delivery } = await twoTaken("claimer");
    const attemptOf = (id: string) => delivery(id).attempt;
    // Running for this agent before it said a word more.
    for (const job of [first, second]) {
      const view = (await (await gw.api(`/v1/jobs/${job.id}`)).json()) as { status: string };
      expect(view.status).toBe("running");
    }
    // Its claim is the one the take made; asked again, the gateway refuses a repeat.
    const claimed = await client.claim(first.id, attemptOf(first.id));
    expect(claimed).toMatchObject({ ok: true, claim: { job: { id: first.id } } });
    expect(await client.claim(first.id, attemptOf(first.id))).toMatchObject({ ok: false });
    // A delivery given back unrun: the agent learns it was claimed (once), to report it.
    expect(client.claimedAhead?.(second.id, attemptOf(second.id))).toBe(true);
    expect(client.claimedAhead?.(second.id, attemptOf(second.id))).toBe(false);
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
