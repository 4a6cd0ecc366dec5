import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Kysely } from "kysely";
import { describe, expect, it, onTestFinished } from "vitest";
import type { Database } from "../../shared/db/schema.ts";
import { openSqlite } from "../../shared/db/sqlite.ts";
import type { QueueLimits } from "../../shared/queue/port.ts";
import { createSqlQueue, type SqlQueue } from "../../shared/queue/sql/index.ts";
import { describeFairRelease } from "../conformance/fair-release.ts";
import {
  describeJobQueueConformance,
  freshModel,
  Inbox,
  type JobQueueFixture,
  queueMessage,
} from "../conformance/job-queue.ts";
import { describeRefill } from "../conformance/refill.ts";

const LIMITS: QueueLimits = { maxAttempts: 3, leaseMs: 400 };

/** A queue over a fresh SQLite file in its own temp folder, removed by `cleanup`. */
async function sqliteFixture(
  onError?: (error: unknown) => void,
): Promise<JobQueueFixture & { queue: SqlQueue }> {
  const dir = mkdtempSync(join(tmpdir(), "gantry-queue-"));
  const path = join(dir, "queue.db");
  const opened: Array<{ db: Kysely<Database>; queue: SqlQueue }> = [];
  const open = async () => {
    const db = await openSqlite(path);
    const queue = createSqlQueue(db, {
      dialect: "sqlite",
      limits: LIMITS,
      pollIntervalMs: 20,
      onError,
    });
    opened.push({ db, queue });
    return queue;
  };
  return {
    queue: await open(),
    limits: LIMITS,
    reopen: open,
    async cleanup() {
      for (const { db, queue } of opened) {
        await queue.close();
        await db.destroy();
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describeJobQueueConformance("sql on SQLite", sqliteFixture);
describeRefill("sql on SQLite", sqliteFixture);
describeFairRelease("sql on SQLite", () => sqliteFixture());

describe("sql queue on SQLite: beyond the port", () => {
  const setUp = async () => {
    const fixture = await sqliteFixture();
    onTestFinished(() => fixture.cleanup());
    return { queue: fixture.queue, model: freshModel() };
  };

  it("keeps dead letters with their reason and attempt count", async () => {
    const { queue, model } = await setUp();
    const poison = queueMessage(model);
    await queue.publish(poison);
    const error = { type: "permanent", code: "bad_input", message: "not an image" } as const;
    const box = new Inbox(5_000, (d) => d.deadLetter(error));
    const consumer = await queue.consume(box.handler, { prefetch: 1 });
    await box.nth(1);
    await consumer.stop();
    expect(await queue.deadLetters(model)).toEqual([{ message: poison, attempts: 1, error }]);
    expect(await queue.deadLetters(freshModel())).toEqual([]);
  });

  it("records max_attempts_exceeded when leases keep running out", async () => {
    const { queue, model } = await setUp();
    await queue.publish(queueMessage(model));
    const box = new Inbox(10_000);
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await box.nth(LIMITS.maxAttempts);
    await expect
      .poll(() => queue.deadLetters(model), { timeout: 5_000, interval: 20 })
      .toMatchObject([{ attempts: LIMITS.maxAttempts, error: { code: "max_attempts_exceeded" } }]);
    await consumer.stop();
  });

  /** A queue whose consumers poll only every 30 s: its rounds are the ones publishes wake. */
  const quietQueue = async () => {
    const dir = mkdtempSync(join(tmpdir(), "gantry-queue-"));
    const reads: string[] = [];
    const path = join(dir, "queue.db");
    const db = await openSqlite(path, (text) => {
      if (/^\s*select "?attempts"? from "?queue_messages"?\s/i.test(text)) reads.push(text);
    });
    const queue = createSqlQueue(db, { dialect: "sqlite", limits: LIMITS, pollIntervalMs: 30_000 });
    onTestFinished(async () => {
      await queue.close();
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    });
    return { db, path, queue, reads, model: freshModel() };
  };

  it("claims what a publish woke it for without reading first", async () => {
    const { queue, reads, model } = await quietQueue();
    const box = new Inbox(10_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 4, models: [model] });
    const before = reads.length;
    for (let n = 1; n <= 20; n++) {
      await queue.publish(queueMessage(model));
      await box.nth(n);
    }
    await consumer.stop();
    // One read a claim was two statements a job; the reads left are the odd timed one.
    expect(reads.length - before).toBeLessThan(5);
  });

  it("looks again after each settle when its publishes come from another process", async () => {
    const { queue, model, path } = await quietQueue();
    // Another process's queue on the same file (its own connection): its publishes wake no
    // consumer here.
    const other = await openSqlite(path);
    const elsewhere = createSqlQueue(other, {
      dialect: "sqlite",
      limits: LIMITS,
      pollIntervalMs: 30_000,
    });
    onTestFinished(async () => {
      await elsewhere.close();
      await other.destroy();
    });
    const first = queueMessage(model);
    const second = queueMessage(model);
    await queue.publish(first);
    let publishedSecond = false;
    // The first is settled only once the second is in the queue: the round after that
    // settle finds it, 30 s before any poll would.
    const box = new Inbox(10_000, async (delivery) => {
      if (!publishedSecond) {
        publishedSecond = true;
        await elsewhere.publish(second);
      }
      await delivery.ack();
    });
    const consumer = await queue.consume(box.handler, { prefetch: 4, models: [model] });
    try {
      expect((await box.nth(2)).message.id).toBe(second.id);
    } finally {
      await consumer.stop();
    }
  });

  it("dead-letters spent messages while publishes keep waking its consumer", async () => {
    const { db, queue, model } = await quietQueue();
    const box = new Inbox(10_000, (d) => d.ack());
    const consumer = await queue.consume(box.handler, { prefetch: 4, models: [model] });
    let publishing = true;
    const publisher = (async () => {
      while (publishing) {
        await queue.publish(queueMessage(model));
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();
    try {
      await box.nth(3);
      // Due in a second, its every attempt spent by consumers that died holding it: by then
      // every round of this consumer is one a publish woke.
      const spent = queueMessage(model);
      await queue.publish(spent, { delayMs: 1_000 });
      await db
        .updateTable("queue_messages")
        .set({ attempts: LIMITS.maxAttempts, lease_expires_at: 1 })
        .where("job_id", "=", spent.id)
        .execute();
      await expect
        .poll(() => queue.deadLetters(model), { timeout: 4_000, interval: 50 })
        .toMatchObject([{ message: { id: spent.id }, error: { code: "max_attempts_exceeded" } }]);
    } finally {
      publishing = false;
      await publisher;
      await consumer.stop();
    }
  });

  it("refuses invalid messages and consume options", async () => {
    const { queue, model } = await setUp();
    const bad = { ...queueMessage(model), id: "not-a-job-id" };
    await expect(queue.publish(bad)).rejects.toThrow();
    await expect(queue.consume(() => {}, { prefetch: 0 })).rejects.toThrow(/prefetch/);
    await expect(queue.consume(() => {}, { prefetch: 1, models: [] })).rejects.toThrow(/models/);
  });
});
