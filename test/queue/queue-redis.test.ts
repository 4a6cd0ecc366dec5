import { describe, expect, it, onTestFinished } from "vitest";
import type { QueueLimits } from "../../shared/queue/port.ts";
import { createClient, RedisKeys } from "../../shared/queue/redis/client.ts";
import { createRedisQueue } from "../../shared/queue/redis/index.ts";
import { describeFairRelease } from "../conformance/fair-release.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  queueMessage,
} from "../conformance/job-queue.ts";
import { itHasLanesAndDeadLetters } from "../conformance/lanes-and-dead-letters.ts";
import { describeRefill } from "../conformance/refill.ts";
import { prefixedQueueFixture } from "../helpers/prefixed-queue-fixture.ts";

/** The machine's Redis (GANTRY_TEST_REDIS_URL overrides it); each test its own key prefix. */
const REDIS_URL = process.env.GANTRY_TEST_REDIS_URL ?? "redis://127.0.0.1:6379";
const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 400 };

function redisFixture(onError?: (error: unknown) => void) {
  return prefixedQueueFixture(
    LIMITS,
    async (prefix) => {
      const queue = createRedisQueue({ url: REDIS_URL, prefix, limits: LIMITS, onError });
      await queue.ready(5_000);
      return queue;
    },
    (queue) => queue.deleteAll(),
  );
}

describeJobQueueConformance("redis streams", redisFixture);
describeRefill("redis streams", redisFixture);
describeFairRelease("redis streams", () => redisFixture());

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

  itHasLanesAndDeadLetters(setUp, LIMITS);

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
