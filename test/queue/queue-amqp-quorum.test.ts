import { connect } from "amqplib";
import { describe, expect, it, onTestFinished } from "vitest";
import { UserError } from "../../shared/errors.ts";
import { createAmqpQueue } from "../../shared/queue/amqp/index.ts";
import { TopologyNames } from "../../shared/queue/amqp/names.ts";
import { describeFairRelease } from "../conformance/fair-release.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  queueMessage,
} from "../conformance/job-queue.ts";
import { itHasLanesAndDeadLetters } from "../conformance/lanes-and-dead-letters.ts";
import { AMQP_LIMITS, AMQP_STEPS, AMQP_URL, amqpFixture } from "../helpers/amqp-fixture.ts";

const URL = AMQP_URL;
const LIMITS = AMQP_LIMITS;
const STEPS = AMQP_STEPS;
const quorumFixture = (onError?: (error: unknown) => void) => amqpFixture("quorum", onError);

describeJobQueueConformance("amqp with quorum queues", quorumFixture);
describeFairRelease("amqp with quorum queues", () => quorumFixture());

describe("amqp quorum queues: beyond the port", () => {
  const setUp = async () => {
    const fixture = await quorumFixture();
    onTestFinished(() => fixture.cleanup());
    return { ...fixture, names: new TopologyNames(fixture.prefix), model: freshModel() };
  };

  itHasLanesAndDeadLetters(setUp, LIMITS);

  it("drains the high lane first when the last urgent job is on its way to the consumer", async () => {
    const { queue, model } = await setUp();
    for (let i = 0; i < 3; i++) await queue.publish(queueMessage(model, 2));
    const urgent = [queueMessage(model, 8), queueMessage(model, 8)];
    for (const message of urgent) await queue.publish(message);
    const box = new Inbox(5_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await box.nth(5);
    // The ack of the first releases the second to this consumer while the slot asks for more.
    expect(box.received.slice(0, 2).map((d) => d.message.id)).toEqual(urgent.map((m) => m.id));
    await consumer.stop();
  });

  it("an urgent job published while every slot is busy takes the next free slot", async () => {
    const { queue, model } = await setUp();
    await queue.publish(queueMessage(model, 5));
    let release = () => {};
    const gate = new Promise<void>((resolve) => (release = resolve));
    let released = false;
    const box = new Inbox(5_000, async (d) => {
      while (box.received.length === 1 && !released) {
        await d.extendLease(LIMITS.leaseMs);
        await Promise.race([
          gate,
          new Promise((resolve) => setTimeout(resolve, LIMITS.leaseMs / 4)),
        ]);
      }
      await d.ack();
    });
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await box.nth(1);
    for (let i = 0; i < 3; i++) await queue.publish(queueMessage(model, 5));
    const urgent = queueMessage(model, 9);
    await queue.publish(urgent);
    // The urgent job waits here for the slot; the backlog waits in the broker.
    await expect.poll(() => queue.depth(model)).toMatchObject({ ready: 3, inFlight: 2 });
    released = true;
    release();
    expect((await box.nth(2)).message.id).toBe(urgent.id);
    await box.nth(5);
    await consumer.stop();
  });

  it("holds no more than prefetch over several models, and parked messages keep their attempt", async () => {
    const { queue } = await setUp();
    const models = [freshModel(), freshModel()];
    for (const model of models)
      for (let i = 0; i < 2; i++) await queue.publish(queueMessage(model));
    let busy = 0;
    let most = 0;
    const box = new Inbox(10_000, async (d) => {
      busy += 1;
      most = Math.max(most, busy);
      if (box.received.length === 1) {
        // Outlive the lease of the messages parked meanwhile, so they are given back.
        for (let i = 0; i < 5; i++) {
          await d.extendLease(LIMITS.leaseMs);
          await new Promise((resolve) => setTimeout(resolve, LIMITS.leaseMs / 2));
        }
      }
      busy -= 1;
      await d.ack();
    });
    const consumer = await queue.consume(box.handler, { prefetch: 1, models });
    await box.nth(4);
    expect(most).toBe(1);
    expect(box.received.map((d) => d.attempt)).toEqual([1, 1, 1, 1]);
    await consumer.stop();
    for (const model of models)
      expect(await queue.depth(model)).toEqual({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
  });

  it("dead-letters on arrival a message whose consumers kept dying, without running it", async () => {
    const { queue, model, names } = await setUp();
    const doomed = queueMessage(model);
    await queue.publish(doomed);
    // Each consumer takes the message and dies (its channel closes): the broker counts it.
    const raw = await connect(URL);
    onTestFinished(() => raw.close());
    for (let i = 0; i < LIMITS.maxAttempts; i++) {
      const channel = await raw.createChannel();
      expect(await channel.get(names.laneQueue(model, "normal"), { noAck: false })).not.toBe(false);
      await channel.close();
    }
    const box = new Inbox(5_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await expect.poll(() => queue.depth(model)).toMatchObject({ ready: 0, inFlight: 0, dead: 1 });
    expect(box.received).toHaveLength(0);
    expect(await queue.deadLetters(model)).toMatchObject([
      { message: doomed, attempts: LIMITS.maxAttempts, error: { code: "max_attempts_exceeded" } },
    ]);
    await consumer.stop();
  });

  it("sends an unreadable message to the dead-letter queue, not to a handler", async () => {
    const { queue, model, names } = await setUp();
    await queue.publish(queueMessage(model)); // declares the model's queues
    const raw = await connect(URL);
    onTestFinished(() => raw.close());
    const channel = await raw.createConfirmChannel();
    channel.publish(names.jobsExchange, names.laneKey(model, "normal"), Buffer.from("{oops"));
    await channel.waitForConfirms();
    const box = new Inbox(5_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await expect.poll(() => queue.depth(model)).toMatchObject({ ready: 0, inFlight: 0, dead: 1 });
    expect(box.received).toHaveLength(1);
    await consumer.stop();
  });

  it("shares queues declared with another maxAttempts, and refuses another queue type", async () => {
    const { queue, model, prefix } = await setUp();
    await queue.publish(queueMessage(model));
    const limits = { ...LIMITS, maxAttempts: 7 };
    const laxer = createAmqpQueue({ url: URL, prefix, limits, retryDelaysMs: STEPS });
    const classic = createAmqpQueue({
      url: URL,
      prefix,
      queueType: "classic",
      retryDelaysMs: STEPS,
    });
    onTestFinished(async () => {
      await Promise.all([laxer.close(), classic.close()]);
    });
    await laxer.publish(queueMessage(model));
    expect(await laxer.depth(model)).toMatchObject({ ready: 2 });
    await expect(classic.publish(queueMessage(model))).rejects.toThrow(UserError);
    await expect(classic.publish(queueMessage(model))).rejects.toThrow(/same queueType/);
  });

  it("refuses a lease or job timeout longer than RabbitMQ's consumer_timeout, and bad options", async () => {
    const { queue } = await setUp();
    const make = (options: Partial<Parameters<typeof createAmqpQueue>[0]>) => () =>
      createAmqpQueue({ url: URL, ...options });
    expect(make({ limits: { leaseMs: 31 * 60_000 } })).toThrow(UserError);
    expect(make({ limits: { leaseMs: 31 * 60_000 } })).toThrow(/consumer_timeout/);
    expect(make({ maxJobMs: 2 * 3_600_000 })).toThrow(/consumer_timeout/);
    expect(make({ prefix: "has space" })).toThrow(UserError);
    expect(make({ retryDelaysMs: [500, 100] })).toThrow(/retryDelaysMs/);
    await expect(queue.consume(() => {}, { prefetch: 0, models: ["x"] })).rejects.toThrow(
      /prefetch/,
    );
    await expect(queue.consume(() => {}, { prefetch: 1, models: [] })).rejects.toThrow(/models/);
    await expect(queue.consume(() => {}, { prefetch: 1 })).rejects.toThrow(/models/);
    await expect(queue.publish({ ...queueMessage("m"), id: "not-a-job-id" })).rejects.toThrow();
  });
});
