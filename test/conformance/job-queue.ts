import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { newId } from "../../shared/ids.ts";
import type { JobError, QueueMessage } from "../../shared/protocol/index.ts";
import {
  type Delivery,
  type JobQueue,
  LeaseLostError,
  type QueueDepth,
  type QueueLimits,
  type RetryOutcome,
} from "../../shared/queue/port.ts";

/**
 * The contract every JobQueue adapter passes unchanged. Each test gets a fresh queue from
 * the factory and fresh model names, so adapters over shared brokers do not see each
 * other's messages. Keep `leaseMs` small in the factory (300-500 ms): the suite waits on
 * lease expiry several times. Tests await deliveries as events; the only fixed waits are
 * short ones asserting that something does *not* happen.
 *
 * The factory passes `onError` to the adapter: whatever an adapter reports there (a handler
 * that threw, a settle that failed in the background) fails the test, since no test here
 * expects one but the deliberate `HANDLER_BUG`.
 */
export interface JobQueueFixture {
  queue: JobQueue;
  limits: QueueLimits;
  /** Another instance over the same storage, to show publish is durable. Optional. */
  reopen?(): Promise<JobQueue>;
  /** Stops everything the fixture made, including reopened queues, and drops the storage. */
  cleanup(): Promise<void>;
}

const TRANSIENT: JobError = { type: "transient", code: "test_failure", message: "try again" };
const POISON: JobError = { type: "permanent", code: "bad_input", message: "cannot decode" };
/** The one error a test throws from its handler on purpose. */
const HANDLER_BUG = new Error("handler bug");

export const freshModel = (): string => `m-${crypto.randomUUID().slice(0, 12)}`;

export function queueMessage(model: string, priority = 5): QueueMessage {
  const deadline = new Date(Date.now() + 3_600_000).toISOString();
  return { v: 1, id: newId("job"), model, priority, attempt: 0, deadline };
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Collects deliveries and lets a test await the n-th one instead of sleeping. */
export class Inbox {
  readonly received: Delivery[] = [];
  private waiters: Array<() => void> = [];

  constructor(
    private readonly patienceMs: number,
    private readonly react?: (delivery: Delivery) => Promise<void> | void,
  ) {}

  readonly handler = async (delivery: Delivery): Promise<void> => {
    this.received.push(delivery);
    for (const waiter of this.waiters.splice(0)) waiter();
    await this.react?.(delivery);
  };

  /** The n-th delivery (1-based), once it has arrived. */
  async nth(n: number): Promise<Delivery> {
    const deadline = Date.now() + this.patienceMs;
    while (this.received.length < n) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`expected ${n} deliveries, got ${this.received.length}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.received[n - 1]!;
  }
}

export function describeJobQueueConformance(
  name: string,
  factory: (onError: (error: unknown) => void) => Promise<JobQueueFixture>,
): void {
  describe(`JobQueue conformance: ${name}`, () => {
    let fixture: JobQueueFixture;
    let queue: JobQueue;
    let limits: QueueLimits;
    let model: string;
    /** Long enough for every lease to run out several times over. */
    let patience: number;
    /** What the adapter reported to `onError` and what handlers threw, but `HANDLER_BUG`. */
    let reported: unknown[];
    const report = (error: unknown) => {
      if (error !== HANDLER_BUG) reported.push(error);
    };

    beforeEach(async () => {
      reported = [];
      fixture = await factory(report);
      ({ queue, limits } = fixture);
      model = freshModel();
      patience = Math.max(5_000, limits.leaseMs * (limits.maxAttempts + 2) * 3);
    });
    afterEach(async () => {
      await fixture.cleanup();
      expect(reported).toEqual([]);
    });

    /**
     * An inbox whose handler's errors fail the test even where an adapter only hands them to
     * `onError`; they are rethrown, so the adapter still sees a throwing handler.
     */
    const inbox = (react?: (delivery: Delivery) => Promise<void> | void) =>
      new Inbox(
        patience,
        react &&
          (async (delivery) => {
            try {
              await react(delivery);
            } catch (error) {
              report(error);
              throw error;
            }
          }),
      );
    const expectDepth = (expected: Partial<QueueDepth>, of = model) =>
      vi.waitFor(async () => expect(await queue.depth(of)).toMatchObject(expected), {
        timeout: patience,
        interval: 20,
      });

    it("delivers a published message once, on attempt 1", async () => {
      const sent = queueMessage(model);
      await queue.publish(sent);
      const box = inbox((d) => d.ack());
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      const first = await box.nth(1);
      expect(first.message).toEqual(sent);
      expect(first.attempt).toBe(1);
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
      await consumer.stop();
    });

    it("redelivers a message that was not settled before its lease ran out", async () => {
      await queue.publish(queueMessage(model));
      const box = inbox();
      const consumer = await queue.consume(box.handler, { prefetch: 2, models: [model] });
      const first = await box.nth(1);
      const second = await box.nth(2);
      expect(second.message.id).toBe(first.message.id);
      expect(second.attempt).toBe(2);
      await second.ack();
      await consumer.stop();
    });

    it("does not redeliver an acked message", async () => {
      await queue.publish(queueMessage(model));
      const box = inbox((d) => d.ack());
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      await box.nth(1);
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
      await delay(limits.leaseMs * 1.5);
      expect(box.received).toHaveLength(1);
      await consumer.stop();
    });

    it("settling or extending through a lost lease rejects with LeaseLostError and leaves the new delivery alone", async () => {
      await queue.publish(queueMessage(model));
      const box = inbox();
      const consumer = await queue.consume(box.handler, { prefetch: 2, models: [model] });
      const stale = await box.nth(1);
      const current = await box.nth(2);
      await current.extendLease(limits.leaseMs * 10); // so a slow machine cannot expire it too
      const poison: JobError = { type: "permanent", code: "poison", message: "bad input" };
      await expect(stale.ack()).rejects.toBeInstanceOf(LeaseLostError);
      await expect(stale.extendLease(1_000)).rejects.toBeInstanceOf(LeaseLostError);
      await expect(stale.retry(0, poison)).rejects.toBeInstanceOf(LeaseLostError);
      await expect(stale.deadLetter(poison)).rejects.toBeInstanceOf(LeaseLostError);
      expect(await queue.depth(model)).toMatchObject({ inFlight: 1, dead: 0 });
      await current.ack();
      // Settled once: a second ack is a lost lease too, never a second settlement.
      await expect(current.ack()).rejects.toBeInstanceOf(LeaseLostError);
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
      await consumer.stop();
    });

    it("retry holds the message back for the delay, then delivers the next attempt", async () => {
      await queue.publish(queueMessage(model));
      // The first delivery holds its lease ten delays long before retrying, so the redelivery
      // a lease running out would bring comes far later than the retry's: a retry that did
      // nothing (or ignored the delay) cannot pass for one that worked.
      const retryDelay = limits.leaseMs;
      const heldFor = retryDelay * 10;
      let retriedAt = 0;
      let againAt = 0;
      const outcomes: RetryOutcome[] = [];
      const box = inbox(async (d) => {
        if (d.attempt > 1) {
          againAt = Date.now();
          return d.ack();
        }
        await d.extendLease(heldFor);
        retriedAt = Date.now();
        outcomes.push(await d.retry(retryDelay, TRANSIENT));
      });
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      await box.nth(1);
      const again = await box.nth(2);
      expect(outcomes).toEqual(["retried"]);
      expect(again.attempt).toBe(2);
      // Clock granularity across machines: a few milliseconds of slack, no more.
      expect(againAt - retriedAt).toBeGreaterThanOrEqual(retryDelay - 25);
      expect(againAt - retriedAt).toBeLessThan(heldFor - retryDelay);
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
      await consumer.stop();
    });

    it("publish with a delay holds the message back", async () => {
      const publishedAt = Date.now();
      await queue.publish(queueMessage(model), { delayMs: limits.leaseMs });
      const box = inbox((d) => d.ack());
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      await box.nth(1);
      expect(Date.now() - publishedAt).toBeGreaterThanOrEqual(limits.leaseMs - 25);
      await consumer.stop();
    });

    it("dead-letters once retries use up maxAttempts", async () => {
      await queue.publish(queueMessage(model));
      const outcomes: string[] = [];
      const box = inbox(async (d) => {
        outcomes.push(await d.retry(0, TRANSIENT));
      });
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      await box.nth(limits.maxAttempts);
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 1 });
      expect(box.received.map((d) => d.attempt)).toEqual(
        Array.from({ length: limits.maxAttempts }, (_, i) => i + 1),
      );
      expect(outcomes.at(-1)).toBe("dead-lettered");
      expect(outcomes.slice(0, -1).every((o) => o === "retried")).toBe(true);
      await consumer.stop();
    });

    it("dead-letters once leases expire maxAttempts times (the consumer keeps dying)", async () => {
      await queue.publish(queueMessage(model));
      const box = inbox();
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      await box.nth(limits.maxAttempts);
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 1 });
      expect(box.received).toHaveLength(limits.maxAttempts);
      await consumer.stop();
    });

    it("deadLetter removes the message from the live queue at once", async () => {
      await queue.publish(queueMessage(model));
      const box = inbox((d) => d.deadLetter(POISON));
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      await box.nth(1);
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 1 });
      await delay(limits.leaseMs * 1.5);
      expect(box.received).toHaveLength(1);
      await consumer.stop();
    });

    it("extendLease keeps a slow delivery from being redelivered", async () => {
      await queue.publish(queueMessage(model));
      const box = inbox();
      const consumer = await queue.consume(box.handler, { prefetch: 2, models: [model] });
      const slow = await box.nth(1);
      // Works three leases long; without extensions it would be redelivered after one. Each
      // extension reaches two leases ahead, so a loaded machine stalling a few hundred ms
      // between two of them cannot let the lease lapse.
      const workUntil = Date.now() + limits.leaseMs * 3;
      while (Date.now() < workUntil) {
        await slow.extendLease(limits.leaseMs * 2);
        await delay(limits.leaseMs / 4);
      }
      expect(box.received).toHaveLength(1);
      await slow.ack();
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
      await consumer.stop();
    });

    it("never holds more than prefetch unsettled deliveries", async () => {
      for (let i = 0; i < 5; i++) await queue.publish(queueMessage(model));
      let unsettled = 0;
      let most = 0;
      const box = inbox(async (d) => {
        unsettled += 1;
        most = Math.max(most, unsettled);
        await delay(30); // stands in for work, so deliveries overlap
        unsettled -= 1; // before ack: the slot may be reused as soon as ack settles
        await d.ack();
      });
      const consumer = await queue.consume(box.handler, { prefetch: 2, models: [model] });
      await box.nth(5);
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
      expect(most).toBe(2);
      await consumer.stop();
    });

    it("delivers higher priority first", async () => {
      for (let i = 0; i < 3; i++) await queue.publish(queueMessage(model, 1));
      const urgent = new Set<string>();
      for (let i = 0; i < 3; i++) {
        const message = queueMessage(model, 8);
        urgent.add(message.id);
        await queue.publish(message);
      }
      const box = inbox((d) => d.ack());
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      await box.nth(6);
      const firstThree = box.received.slice(0, 3).map((d) => d.message.id);
      expect(new Set(firstThree)).toEqual(urgent);
      await consumer.stop();
    });

    it("consumes only the listed models", async () => {
      const other = freshModel();
      await queue.publish(queueMessage(other));
      await queue.publish(queueMessage(model));
      const box = inbox((d) => d.ack());
      const consumer = await queue.consume(box.handler, { prefetch: 2, models: [model] });
      expect((await box.nth(1)).message.model).toBe(model);
      await delay(limits.leaseMs);
      expect(box.received).toHaveLength(1);
      expect(await queue.depth(other)).toMatchObject({ ready: 1, inFlight: 0 });
      await consumer.stop();
    });

    it("a throwing handler does not stop the consumer; its message comes back", async () => {
      const doomed = queueMessage(model, 9);
      await queue.publish(doomed);
      await queue.publish(queueMessage(model, 1));
      const box = inbox(async (d) => {
        if (d.message.id === doomed.id && d.attempt === 1) throw HANDLER_BUG;
        await d.ack();
      });
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      await box.nth(3);
      const doomedAttempts = box.received.filter((d) => d.message.id === doomed.id);
      expect(doomedAttempts.map((d) => d.attempt)).toEqual([1, 2]);
      await expectDepth({ ready: 0, inFlight: 0, delayed: 0, dead: 0 });
      await consumer.stop();
    });

    it("stop() waits for in-flight deliveries and takes no new ones", async () => {
      await queue.publish(queueMessage(model));
      let finish = () => {};
      const gate = new Promise<void>((resolve) => (finish = resolve));
      const box = inbox(async (d) => {
        await gate;
        await d.ack();
      });
      const consumer = await queue.consume(box.handler, { prefetch: 1, models: [model] });
      await box.nth(1);
      let stopped = false;
      const stopping = consumer.stop().then(() => (stopped = true));
      await delay(50);
      expect(stopped).toBe(false);
      finish();
      await stopping;
      await queue.publish(queueMessage(model));
      await delay(limits.leaseMs);
      expect(box.received).toHaveLength(1);
      expect(await queue.depth(model)).toMatchObject({ ready: 1 });
    });

    it("publish resolves once the message is durable: another instance sees it", async ({
      skip,
    }) => {
      if (!fixture.reopen) return skip("the factory cannot open a second instance");
      const sent = queueMessage(model);
      await queue.publish(sent);
      const second = await fixture.reopen();
      expect(await second.depth(model)).toMatchObject({ ready: 1 });
      const box = inbox((d) => d.ack());
      const consumer = await second.consume(box.handler, { prefetch: 1, models: [model] });
      expect((await box.nth(1)).message).toEqual(sent);
      await consumer.stop();
    });
  });
}
