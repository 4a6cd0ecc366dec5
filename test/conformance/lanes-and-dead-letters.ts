import { expect, it } from "vitest";
import type { DeadLetter, JobQueue, QueueLimits } from "../../shared/queue/port.ts";
import { freshModel, Inbox, queueMessage } from "./job-queue.ts";

/** A queue that keeps its dead letters readable: amqp, redis and nats. */
export interface DeadLetteringQueue extends JobQueue {
  deadLetters(model: string): Promise<DeadLetter[]>;
}

const POISON = { type: "permanent", code: "bad_input", message: "not an image" } as const;
const OOM = { type: "transient", code: "oom", message: "out of memory" } as const;

/**
 * Beyond the port, for the brokers with priority lanes and a dead-letter store of their
 * own: a high job is taken before a backlog of normal ones, and a dead letter keeps its
 * reason and the attempt it died on. Call inside the adapter's describe block.
 */
export function itHasLanesAndDeadLetters(
  setUp: () => Promise<{ queue: DeadLetteringQueue; model: string }>,
  limits: QueueLimits,
  inboxMs = 5_000,
): void {
  it("keeps dead letters with their reason and attempt count", async () => {
    const { queue, model } = await setUp();
    const poison = queueMessage(model);
    const spent = queueMessage(model);
    await queue.publish(poison);
    await queue.publish(spent);
    const box = new Inbox(inboxMs, async (d) => {
      if (d.message.id === poison.id) return d.deadLetter(POISON);
      await d.retry(0, OOM);
    });
    const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
    await box.nth(1 + limits.maxAttempts);
    await expect.poll(() => queue.depth(model)).toMatchObject({ dead: 2, inFlight: 0 });
    await consumer.stop();
    const letters = await queue.deadLetters(model);
    expect(letters).toHaveLength(2);
    expect(letters).toContainEqual({ message: poison, attempts: 1, error: POISON });
    expect(letters).toContainEqual({ message: spent, attempts: limits.maxAttempts, error: OOM });
    // Reading them leaves them where they are.
    expect(await queue.depth(model)).toMatchObject({ dead: 2 });
    expect(await queue.deadLetters(freshModel())).toEqual([]);
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
}
