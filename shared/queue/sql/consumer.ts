import { nextTurn } from "../../pause.ts";
import type { JobError, QueueMessage } from "../../protocol/index.ts";
import { type LocalLease, openLocalLease } from "../lease.ts";
import { type Delivery, type DeliveryHandler, LeaseLostError, type RetryOutcome } from "../port.ts";
import { PullLoop, type PullSlots } from "../pull-loop.ts";
import { type Context, claim, dead, IDLE_POLL_MS, parseBody, type Row } from "./claim.ts";
import { giveBackLeased, leaseOf, releaseLeased, updateLeased } from "./leases.ts";
import { Waiter } from "./waiter.ts";

/** A polling consumer of the `sql` queue: claims up to its free prefetch slots per poll. */
export interface ConsumerSettings extends PullSlots {
  models: readonly string[] | undefined;
  pollMs: number;
  /** Overflow: only messages ready this long (ConsumeOptions.minAgeMs); 0 for all. */
  minAgeMs: number;
}

/**
 * A polling loop that never holds more than `prefetch` unsettled deliveries. A slot frees
 * when its delivery is settled or when its lease runs out (the message is then someone
 * else's), so a handler that throws or forgets to settle cannot wedge the consumer.
 */
export function startConsumer(ctx: Context, handler: DeliveryHandler, settings: ConsumerSettings) {
  const { models, pollMs, minAgeMs } = settings;
  // A wake that arrives while a claim is running is kept by the loop for its next pause.
  // Publishes in this process wake the loop (the embedded default: the gateway's and the
  // agent's queue are one). While they come, a settle need not wake it too: the round after
  // it would only find the queue as the last one left it, one read a job for nothing. A
  // consumer that hears no publish (its publishers are other processes) looks again after
  // each settle, as a fair release publishes the next job when one ends.
  let heardAt = Number.NEGATIVE_INFINITY;
  const slots = new PullLoop(settings, () => Date.now() - heardAt > IDLE_POLL_MS);
  // A round a publish woke skips the claim's read, but one round in IDLE_POLL_MS reads, so
  // spent messages are dead-lettered however busy the queue (claim.ts).
  let published = false;
  let readAt = 0;
  const onPublish = (model: string) => {
    if (models && !models.includes(model)) return;
    published = true;
    heardAt = Date.now();
    slots.wake();
  };
  // A publish is never old enough for an overflow consumer: it finds ripe messages by polling.
  if (minAgeMs === 0) ctx.wakers.add(onPublish);

  const dispatch = (row: Row) => {
    const slot = openLocalLease(Date.now() + ctx.limits.leaseMs, slots.hold(row.queue));
    const message = parseBody(row.body);
    if (!message) {
      // Nothing could ever process it; keep it for inspection rather than redeliver forever.
      const error: JobError = { type: "permanent", code: "invalid_message", message: row.body };
      updateLeased(ctx.db, leaseOf(row), dead(error)).catch(ctx.onError).finally(slot.free);
      return;
    }
    const delivery = createDelivery(ctx, row, message, slot);
    Promise.resolve()
      .then(() => handler(delivery))
      .catch(ctx.onError);
  };

  // Between rounds, a publish may lease to it directly (hand-off.ts): handed rows count as a
  // publish heard, so the settles after them do not send the loop to look for nothing.
  const waiter = new Waiter(
    ctx.limits.leaseMs,
    models,
    () => slots.due,
    (rows) => {
      heardAt = Date.now();
      for (const row of rows) dispatch(row);
    },
  );
  /** A pause between rounds, as a waiter a publish may hand its messages to. */
  const pauseWaiting = async (ms: number) => {
    if (minAgeMs === 0) ctx.waiters.add(waiter);
    try {
      return await slots.pause(ms);
    } finally {
      ctx.waiters.delete(waiter);
      // Rows promised by a publish under way are leased to it: held before the next round.
      await waiter.settled();
    }
  };

  const loop = async () => {
    let interval = pollMs;
    while (!slots.stopped) {
      slots.clearWake();
      const free = slots.due;
      if (free <= 0) {
        await slots.pause(IDLE_POLL_MS);
        continue;
      }
      const read = !published || Date.now() - readAt >= IDLE_POLL_MS;
      published = false;
      if (read) readAt = Date.now();
      let rows: Row[] = [];
      try {
        rows = await claim(ctx, models, free, minAgeMs, read);
      } catch (error) {
        ctx.onError(error);
      }
      for (const row of rows) dispatch(row);
      slots.tookRound(free, rows.length);
      if (rows.length === free) continue;
      interval = rows.length > 0 ? pollMs : Math.min(interval * 2, IDLE_POLL_MS);
      if (await pauseWaiting(interval)) {
        interval = pollMs;
        // Publishes come several in one turn of the event loop (the submits a turn read, a
        // release pass's statements of 12 rows on SQLite): the claim after the first one's
        // wake waits for the turn to end and takes them together (in process, SQLite's calls
        // finish before anything else runs).
        await nextTurn();
      }
    }
  };
  const running = loop();

  let stopping: Promise<void> | undefined;
  return {
    stop() {
      stopping ??= slots.halt(running, () => ctx.wakers.delete(onPublish));
      return stopping;
    },
  };
}

function createDelivery(ctx: Context, row: Row, message: QueueMessage, slot: LocalLease): Delivery {
  const { db, limits } = ctx;
  const attempt = Number(row.attempts);
  const lease = leaseOf(row);
  /** Frees the slot once the database answered; no changed row means the lease was lost. */
  const settle = async (changedRows: Promise<bigint>) => {
    const changed = await changedRows;
    slot.free();
    if (changed === 0n) throw new LeaseLostError(row.job_id);
  };
  const deadLetter = (error: JobError) => settle(updateLeased(db, lease, dead(error)));

  return {
    message,
    attempt,
    ack: () => settle(ctx.ack(lease)),
    async retry(delayMs: number, error: JobError): Promise<RetryOutcome> {
      if (attempt >= limits.maxAttempts) {
        await deadLetter(error);
        return "dead-lettered";
      }
      await settle(releaseLeased(ctx, lease, delayMs, error, limits.maxAttempts));
      return "retried";
    },
    deadLetter,
    giveBack: () => settle(giveBackLeased(ctx, lease)),
    async extendLease(ms: number) {
      const changed = await updateLeased(db, lease, { lease_expires_at: ctx.clock() + ms });
      if (changed > 0n) return slot.holdUntil(Date.now() + ms);
      slot.free();
      throw new LeaseLostError(row.job_id);
    },
  };
}
