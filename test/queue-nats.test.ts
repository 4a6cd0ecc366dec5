import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it, onTestFinished } from "vitest";
import { createNatsQueue, type NatsQueue } from "../shared/queue/nats/index.ts";
import { NatsNames } from "../shared/queue/nats/names.ts";
import { pullNow } from "../shared/queue/nats/topology.ts";
import type { QueueLimits } from "../shared/queue/port.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  type JobQueueFixture,
  queueMessage,
} from "./conformance/job-queue.ts";

/** The machine's NATS with JetStream (GANTRY_TEST_NATS_SERVER overrides it); each test its own prefix. */
const SERVER = process.env.GANTRY_TEST_NATS_SERVER ?? "127.0.0.1:4222";
const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 500 };

async function natsFixture(): Promise<JobQueueFixture & { queue: NatsQueue; prefix: string }> {
  const prefix = `gantry-test-${crypto.randomUUID().slice(0, 8)}`;
  const opened: NatsQueue[] = [];
  const open = async () => {
    const queue = await createNatsQueue({
      connection: { servers: SERVER },
      prefix,
      limits: LIMITS,
    });
    opened.push(queue);
    return queue;
  };
  const queue = await open();
  return {
    queue,
    prefix,
    limits: LIMITS,
    reopen: open,
    async cleanup() {
      for (const q of opened.slice(1)) await q.close();
      await queue.deleteAll();
      await queue.close();
    },
  };
}

describeJobQueueConformance("nats jetstream", natsFixture);

describe("nats queue: beyond the port", () => {
  const setUp = async () => {
    const fixture = await natsFixture();
    onTestFinished(() => fixture.cleanup());
    return { ...fixture, names: new NatsNames(fixture.prefix), model: freshModel() };
  };
  const POISON = { type: "permanent", code: "bad_input", message: "not an image" } as const;

  it("keeps dead letters with their reason and attempt count", async () => {
    const { queue, model } = await setUp();
    const poison = queueMessage(model);
    const spent = queueMessage(model);
    await queue.publish(poison);
    await queue.publish(spent);
    const box = new Inbox(10_000, async (d) => {
      if (d.message.id === poison.id) return d.deadLetter(POISON);
      await d.retry(0, { type: "transient", code: "oom", message: "out of memory" });
    });
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await box.nth(1 + LIMITS.maxAttempts);
    await expect.poll(() => queue.depth(model)).toMatchObject({ dead: 2, inFlight: 0 });
    await consumer.stop();
    const letters = await queue.deadLetters(model);
    expect(letters).toContainEqual({ message: poison, attempts: 1, error: POISON });
    expect(letters).toContainEqual({
      message: spent,
      attempts: LIMITS.maxAttempts,
      error: { type: "transient", code: "oom", message: "out of memory" },
    });
  });

  it("drains the high lane first even when one urgent job sits behind a backlog", async () => {
    const { queue, model } = await setUp();
    for (let i = 0; i < 3; i++) await queue.publish(queueMessage(model, 2));
    const urgent = queueMessage(model, 7);
    await queue.publish(urgent);
    const box = new Inbox(5_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await box.nth(4);
    expect(box.received[0]!.message.id).toBe(urgent.id);
    await consumer.stop();
  });

  it("stores a retried publish once (Nats-Msg-Id), and again once its message is gone", async () => {
    const { queue, model, names, prefix } = await setUp();
    const message = queueMessage(model);
    await queue.publish(message);
    await queue.publish(message);
    expect(await queue.depth(model)).toMatchObject({ ready: 1 });
    expect(await queue.absent([message])).toEqual([]);
    // Behind Gantry's back: the message vanishes (a crash, an operator's purge).
    const raw = await connect({ servers: SERVER });
    onTestFinished(() => raw.close());
    const jsm = await jetstreamManager(raw);
    await jsm.streams.purge(names.stream, { filter: names.subject(model, "normal", message.id) });
    expect(await queue.absent([message])).toEqual([message.id]);
    await queue.publish(message); // the outbox republishes it: a duplicate id, but no message
    expect(await queue.depth(model)).toMatchObject({ ready: 1 });
    expect(prefix).toContain("gantry-test-");
  });

  it("dead-letters a message whose last delivery's holder died (MAX_DELIVERIES advisory)", async () => {
    const { queue, model, names } = await setUp();
    const doomed = queueMessage(model);
    await queue.publish(doomed);
    // Any consumer of this queue listens for the advisory.
    const idle = await queue.consume(() => {}, { prefetch: 1, models: [freshModel()] });
    const raw = await connect({ servers: SERVER });
    onTestFinished(() => raw.close());
    // Consumers that take the message and die: the server counts each delivery.
    for (let i = 0; i < LIMITS.maxAttempts + 1; i++) {
      await expect
        .poll(() => pullNow(raw, names.stream, names.consumer(model, "normal"), 1), {
          timeout: 5_000,
          interval: 50,
        })
        .toHaveLength(1);
    }
    // The server gives up on the message when a pull asks for it next (the advisory then).
    await expect
      .poll(
        async () => {
          expect(await pullNow(raw, names.stream, names.consumer(model, "normal"), 1)).toEqual([]);
          return queue.depth(model);
        },
        { timeout: 10_000, interval: 100 },
      )
      .toMatchObject({ ready: 0, inFlight: 0, dead: 1 });
    expect(await queue.deadLetters(model)).toMatchObject([
      { message: doomed, error: { code: "max_attempts_exceeded" } },
    ]);
    expect(await queue.absent([doomed])).toEqual([doomed.id]);
    await idle.stop();
  });
});
