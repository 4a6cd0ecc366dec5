import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import { UserError } from "../../shared/errors.ts";
import { type AmqpQueueType, createAmqpQueue } from "../../shared/queue/amqp/index.ts";
import type { Delivery, JobQueue, QueueLimits } from "../../shared/queue/port.ts";
import { createSqlQueue } from "../../shared/queue/sql/index.ts";
import { freshModel, Inbox, queueMessage } from "../conformance/job-queue.ts";
import { AMQP_URL } from "../helpers/amqp-fixture.ts";

/**
 * Overflow capacity (GANTRY_OVERFLOW_AFTER_SECONDS): beside a "GPU" consumer whose one slot
 * is taken, an overflow consumer takes only jobs that have waited its threshold, and while
 * the GPU keeps up it takes nothing.
 */
const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 30_000 };
const MIN_AGE_MS = 600;

describe("overflow consumers on the sql queue (claim predicate on the ready time)", () => {
  /** A SQLite queue whose clock the test moves: time passes without the test sleeping. */
  async function setUp() {
    const dir = mkdtempSync(join(tmpdir(), "gantry-overflow-"));
    const db = await openSqlite(join(dir, "queue.db"));
    let now = Date.now();
    // Every claim reads the clock: counting the reads tells when a consumer has polled.
    let reads = 0;
    const readers: Array<() => void> = [];
    const queue = createSqlQueue(db, {
      dialect: "sqlite",
      limits: LIMITS,
      pollIntervalMs: 10,
      clock: () => {
        reads += 1;
        for (const wake of readers.splice(0)) wake();
        return now;
      },
    });
    const polled = async (count: number) => {
      const target = reads + count;
      while (reads < target) await new Promise<void>((resolve) => readers.push(resolve));
    };
    onTestFinished(async () => {
      await queue.close();
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    });
    return { queue, advance: (ms: number) => (now += ms), now: () => now, polled };
  }

  it("takes nothing while the GPU keeps up, and only jobs past the threshold once it cannot", async () => {
    const { queue, advance, now, polled } = await setUp();
    const model = freshModel();
    const gpu = new Inbox(5_000);
    const overflow = new Inbox(5_000);
    const seen = new Map<string, number>();
    const overflowAt = (delivery: Delivery) => void seen.set(delivery.message.id, now());
    await queue.consume(gpu.handler, { prefetch: 1, models: [model] });
    await queue.consume(
      async (delivery) => {
        overflowAt(delivery);
        await overflow.handler(delivery);
      },
      { prefetch: 1, models: [model], minAgeMs: MIN_AGE_MS },
    );

    // No backlog: each job is taken by the GPU consumer, however much time then passes.
    for (let i = 1; i <= 3; i++) {
      await queue.publish(queueMessage(model));
      const delivery = await gpu.nth(i);
      advance(MIN_AGE_MS * 2);
      await delivery.ack();
    }
    expect(overflow.received).toHaveLength(0);

    // Saturated: the GPU holds job 4; job 5 waits, and overflow takes it once it is old enough.
    await queue.publish(queueMessage(model));
    const held = await gpu.nth(4);
    const waiting = queueMessage(model);
    const publishedAt = now();
    await queue.publish(waiting);
    expect((await queue.depth(model)).ready).toBe(1);
    advance(MIN_AGE_MS - 1);
    // The saturated GPU consumer does not claim, so these reads are the overflow consumer's
    // polls, with the clock just short of the threshold: it still takes nothing.
    await polled(3);
    expect(overflow.received).toHaveLength(0);
    advance(1);
    const taken = await overflow.nth(1);
    expect(taken.message.id).toBe(waiting.id);
    expect(seen.get(waiting.id)! - publishedAt).toBeGreaterThanOrEqual(MIN_AGE_MS);
    expect(gpu.received).toHaveLength(4);
    await Promise.all([held.ack(), taken.ack()]);
  });
});

describe.each<AmqpQueueType>(["quorum", "classic"])(
  "overflow consumers on amqp (%s: consumer priority, then held until old enough)",
  (queueType) => {
    async function setUp(): Promise<JobQueue> {
      const queue = createAmqpQueue({
        url: AMQP_URL,
        queueType,
        prefix: `gantry-test-${crypto.randomUUID().slice(0, 12)}`,
        limits: LIMITS,
        retryDelaysMs: [100],
        onError: (error) => console.error(error),
      });
      await queue.ready(5_000);
      onTestFinished(async () => {
        await queue.deleteTopology();
        await queue.close();
      });
      return queue;
    }

    it("hands the overflow consumer nothing while the GPU consumer has room", async () => {
      const queue = await setUp();
      const model = freshModel();
      const gpu = new Inbox(10_000, (delivery) => delivery.ack());
      const overflow = new Inbox(10_000, (delivery) => delivery.ack());
      // The overflow consumer first, so a broker without consumer priorities would feed it.
      await queue.consume(overflow.handler, { prefetch: 4, models: [model], minAgeMs: 200 });
      // Room for every job at once: the GPU consumer is never at its prefetch, so never busy.
      await queue.consume(gpu.handler, { prefetch: 32, models: [model] });
      for (let i = 0; i < 20; i++) await queue.publish(queueMessage(model));
      await gpu.nth(20);
      expect(overflow.received).toHaveLength(0);
    });

    it("takes jobs only once they have waited the threshold while the GPU is saturated", async () => {
      const queue = await setUp();
      const model = freshModel();
      const gpu = new Inbox(10_000);
      const takenAt = new Map<string, number>();
      const overflow = new Inbox(10_000, (delivery) => {
        takenAt.set(delivery.message.id, Date.now());
        return delivery.ack();
      });
      await queue.consume(gpu.handler, { prefetch: 1, models: [model] });
      await queue.consume(overflow.handler, {
        prefetch: 2,
        models: [model],
        minAgeMs: MIN_AGE_MS,
      });
      await queue.publish(queueMessage(model));
      const held = await gpu.nth(1);
      const publishedAt = new Map<string, number>();
      const backlog = [queueMessage(model), queueMessage(model)];
      for (const message of backlog) {
        publishedAt.set(message.id, Date.now());
        await queue.publish(message);
      }
      await overflow.nth(2);
      for (const message of backlog) {
        const waited = takenAt.get(message.id)! - publishedAt.get(message.id)!;
        expect(waited).toBeGreaterThanOrEqual(MIN_AGE_MS);
      }
      expect(gpu.received).toHaveLength(1);
      await held.ack();
    });
  },
);

describe("GANTRY_OVERFLOW_AFTER_SECONDS", () => {
  const base = {
    GANTRY_GATEWAY_URL: "http://127.0.0.1:8787",
    GANTRY_QUEUE_URL: "sqlite:./q.db",
    GANTRY_AGENT_TOKEN: "t".repeat(24),
  };

  it("is read in seconds and must be shorter than the lease", () => {
    expect(parseAgentConfig(base).overflowAfterMs).toBeUndefined();
    expect(parseAgentConfig({ ...base, GANTRY_OVERFLOW_AFTER_SECONDS: "5" }).overflowAfterMs).toBe(
      5_000,
    );
    expect(() =>
      parseAgentConfig({
        ...base,
        GANTRY_OVERFLOW_AFTER_SECONDS: "90",
        GANTRY_LEASE_SECONDS: "60",
      }),
    ).toThrow(UserError);
    expect(() => parseAgentConfig({ ...base, GANTRY_OVERFLOW_AFTER_SECONDS: "soon" })).toThrow(
      /GANTRY_OVERFLOW_AFTER_SECONDS/,
    );
  });
});
