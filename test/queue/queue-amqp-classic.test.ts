import { connect } from "amqplib";
import { describe, expect, it, onTestFinished } from "vitest";
import { delayStepFor } from "../../shared/queue/amqp/index.ts";
import { TopologyNames } from "../../shared/queue/amqp/names.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  queueMessage,
} from "../conformance/job-queue.ts";
import { AMQP_URL, amqpFixture } from "../helpers/amqp-fixture.ts";

const URL = AMQP_URL;
const classicFixture = (onError?: (error: unknown) => void) => amqpFixture("classic", onError);

describeJobQueueConformance("amqp with classic priority queues", classicFixture);

describe("amqp classic queues: beyond the port", () => {
  const setUp = async () => {
    const fixture = await classicFixture();
    onTestFinished(() => fixture.cleanup());
    return { ...fixture, names: new TopologyNames(fixture.prefix), model: freshModel() };
  };

  it("keeps dead letters with their reason and attempt count", async () => {
    const { queue, model } = await setUp();
    const poison = queueMessage(model);
    await queue.publish(poison);
    const error = { type: "permanent", code: "bad_input", message: "not an image" } as const;
    const box = new Inbox(5_000, (d) => d.deadLetter(error));
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await box.nth(1);
    await consumer.stop();
    expect(await queue.deadLetters(model)).toEqual([{ message: poison, attempts: 1, error }]);
    expect(await queue.deadLetters()).toHaveLength(1);
  });

  it("shares one prefetch over several models (a channel-wide limit)", async () => {
    const { queue } = await setUp();
    const models = [freshModel(), freshModel(), freshModel()];
    for (const model of models)
      for (let i = 0; i < 2; i++) await queue.publish(queueMessage(model));
    let busy = 0;
    let most = 0;
    const box = new Inbox(10_000, async (d) => {
      busy += 1;
      most = Math.max(most, busy);
      await new Promise((resolve) => setTimeout(resolve, 20));
      busy -= 1;
      await d.ack();
    });
    const consumer = await queue.consume(box.handler, { prefetch: 2, models });
    await box.nth(6);
    expect(most).toBe(2);
    expect(box.received.every((d) => d.attempt === 1)).toBe(true);
    await consumer.stop();
  });

  it("counts a delivery whose consumer died (classic queues only say it was redelivered)", async () => {
    const { queue, model, names } = await setUp();
    await queue.publish(queueMessage(model));
    const raw = await connect(URL);
    onTestFinished(() => raw.close());
    const channel = await raw.createChannel();
    expect(await channel.get(names.laneQueue(model, "normal"), { noAck: false })).not.toBe(false);
    await channel.close();
    const box = new Inbox(5_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    expect((await box.nth(1)).attempt).toBe(2);
    await consumer.stop();
  });
});

describe("delay steps", () => {
  it("rounds a delay up to the next step, caps it at the largest, and skips none", () => {
    const steps = [100, 500, 2_000];
    expect(delayStepFor(steps, 0)).toBeUndefined();
    expect(delayStepFor(steps, -5)).toBeUndefined();
    expect(delayStepFor(steps, 1)).toBe(100);
    expect(delayStepFor(steps, 100)).toBe(100);
    expect(delayStepFor(steps, 101)).toBe(500);
    expect(delayStepFor(steps, 60_000)).toBe(2_000);
  });
});
