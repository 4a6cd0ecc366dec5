import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Delivery } from "../../shared/queue/port.ts";
import { freshModel, Inbox, type JobQueueFixture, queueMessage } from "./job-queue.ts";

/**
 * `ConsumeOptions.refillAt`, for the pulling adapters (sql, sqs, redis, nats, the gateway's
 * queue; amqp's broker pushes and ignores it): a consumer at its prefetch with more waiting
 * takes its next deliveries once that many slots are free, not one per settle.
 */
export function describeRefill(
  name: string,
  factory: (onError: (error: unknown) => void) => Promise<JobQueueFixture>,
): void {
  describe(`refillAt: ${name}`, () => {
    let fixture: JobQueueFixture;
    let reported: unknown[];
    beforeEach(async () => {
      reported = [];
      fixture = await factory((error) => reported.push(error));
    });
    afterEach(async () => {
      await fixture.cleanup();
      expect(reported).toEqual([]);
    });

    it("a full consumer with a backlog waits until refillAt slots are free, then takes them", async () => {
      const { queue, limits } = fixture;
      const model = freshModel();
      for (let i = 0; i < 9; i++) await queue.publish(queueMessage(model));
      const patience = Math.max(5_000, limits.leaseMs * 10);
      const box = new Inbox(patience);
      const consumer = await queue.consume(box.handler, {
        prefetch: 4,
        refillAt: 3,
        models: [model],
      });
      const held = async (n: number): Promise<Delivery[]> => {
        await box.nth(n);
        return box.received.slice(0, n);
      };
      const [first, second, third, fourth] = await held(4);
      // Kept past the waits below: the test is not about expiry.
      await fourth!.extendLease(limits.leaseMs * 10);
      // Two slots free of the three it waits for: no round. A round that took one would have
      // delivered well within a lease's time (rounds are milliseconds here).
      await first!.ack();
      await second!.ack();
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(box.received).toHaveLength(4);
      // The third frees the round: three more, and the consumer is at its prefetch again.
      await third!.ack();
      const refilled = await held(7);
      expect(refilled.slice(4).every((d) => d.attempt === 1)).toBe(true);
      for (const delivery of refilled.slice(3)) await delivery.ack();
      // Seven acked, two left: fewer than the round offers, taken at once all the same.
      for (const delivery of await held(9)) {
        if (!refilled.includes(delivery)) await delivery.ack();
      }
      await consumer.stop();
    });
  });
}
