import { describe, expect, it, onTestFinished } from "vitest";
import type { QueueLimits } from "../shared/queue/port.ts";
import { createClient, RedisKeys } from "../shared/queue/redis/client.ts";
import { createRedisQueue, type RedisQueue } from "../shared/queue/redis/index.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  type JobQueueFixture,
  queueMessage,
} from "./conformance/job-queue.ts";

/** The machine's Redis (GANTRY_TEST_REDIS_URL overrides it); each test its own key prefix. */
const REDIS_URL = process.env.GANTRY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 400 };

async function redisFixture(): Promise<JobQueueFixture & { queue: RedisQueue; prefix: string }> {
  const prefix = `gantry-test-${crypto.randomUUID().slice(0, 8)}`;
  const opened: RedisQueue[] = [];
  const open = async () => {
    const queue = createRedisQueue({ url: REDIS_URL, prefix, limits: LIMITS });
    await queue.ready(5_000);
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

describeJobQueueConformance("redis streams", redisFixture);

describe("redis queue: beyond the port", () => {
  const setUp = async () => {
    const fixture = await redisFixture();
    onTestFinished(() => fixture.cleanup());
    const raw = createClient({ url: REDIS_URL });
    await raw.connect();
    onTestFinished(() => raw.close());
    return { ...fixture, raw, keys: new RedisKeys(fixture.prefix), model: freshModel() };
  };
  const POISON = { type: "permanent", code: "bad_input", message: "not an image" } as const;

  it("keeps dead letters with their reason and attempt count", async () => {
    const { queue, model } = await setUp();
    const poison = queueMessage(model);
    const spent = queueMessage(model);
    await queue.publish(poison);
    await queue.publish(spent);
    const box = new Inbox(5_000, async (d) => {
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

  it("extends a lease without counting a delivery, and deletes acked entries", async () => {
    const { queue, model, raw, keys } = await setUp();
    await queue.publish(queueMessage(model));
    const box = new Inbox(5_000);
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    const first = await box.nth(1);
    await first.extendLease(LIMITS.leaseMs);
    const [entry] = (await raw.sendCommand([
      "XPENDING",
      keys.lane(model, "normal"),
      "agents",
      "-",
      "+",
      "10",
    ])) as Array<[string, string, number, number]>;
    expect(entry?.[3]).toBe(1); // the delivery count: JUSTID did not bump it
    await first.ack();
    expect(await raw.xLen(keys.lane(model, "normal"))).toBe(0);
    await consumer.stop();
    // A stopped consumer with nothing pending leaves the group.
    expect(await raw.xInfoConsumers(keys.lane(model, "normal"), "agents")).toEqual([]);
  });

  it("sends an unreadable entry to the dead-letter stream, not to a handler", async () => {
    const { queue, model, raw, keys } = await setUp();
    await queue.publish(queueMessage(model));
    await raw.xAdd(keys.lane(model, "normal"), "*", { m: "{oops", a: "0", j: "job_x" });
    const box = new Inbox(5_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 2, models: [model] });
    await expect.poll(() => queue.depth(model)).toMatchObject({ ready: 0, inFlight: 0, dead: 1 });
    expect(box.received).toHaveLength(1);
    await consumer.stop();
  });

  it("absent: finds the job whose message was deleted behind its back", async () => {
    const { queue, model, raw, keys } = await setUp();
    const kept = queueMessage(model);
    const lost = queueMessage(model);
    const later = queueMessage(model);
    await queue.publish(kept);
    await queue.publish(lost);
    await queue.publish(later, { delayMs: 60_000 });
    expect(await queue.absent([kept, lost, later])).toEqual([]);
    const entries = await raw.xRange(keys.lane(model, "normal"), "-", "+");
    const victim = entries.find((e) => e.message.j === lost.id)!;
    await raw.xDel(keys.lane(model, "normal"), victim.id);
    expect(await queue.absent([kept, lost, later])).toEqual([lost.id]);
    expect(await queue.absent([queueMessage(model)])).toHaveLength(1);
  });

  it("keeps retries waiting in Redis, so another instance delivers them when due", async () => {
    const { queue, model, reopen } = await setUp();
    await queue.publish(queueMessage(model));
    const first = new Inbox(5_000, (d) => d.retry(LIMITS.leaseMs, POISON).then(() => {}));
    const consumer = await queue.consume(first.handler, { prefetch: 1, models: [model] });
    await first.nth(1);
    await consumer.stop();
    const second = await reopen!();
    expect(await second.depth(model)).toMatchObject({ delayed: 1, ready: 0 });
    const box = new Inbox(5_000, (d) => d.ack());
    const again = await second.consume(box.handler, { prefetch: 1, models: [model] });
    expect((await box.nth(1)).attempt).toBe(2);
    await again.stop();
  });
});
