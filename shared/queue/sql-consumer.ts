import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import type { JobError, QueueMessage } from "../protocol/index.ts";
import { type Delivery, type DeliveryHandler, LeaseLostError, type RetryOutcome } from "./port.ts";
import {
  type Context,
  claim,
  dead,
  IDLE_POLL_MS,
  parseBody,
  type Row,
  storeError,
} from "./sql-claim.ts";

/** A polling consumer of the `sql` queue: claims up to its free prefetch slots per poll. */
export interface ConsumerSettings {
  prefetch: number;
  models: readonly string[] | undefined;
  pollMs: number;
  /** Overflow: only messages ready this long (ConsumeOptions.minAgeMs). */
  minAgeMs?: number;
}

/**
 * A polling loop that never holds more than `prefetch` unsettled deliveries. A slot frees
 * when its delivery is settled or when its lease runs out (the message is then someone
 * else's), so a handler that throws or forgets to settle cannot wedge the consumer.
 */
export function startConsumer(ctx: Context, handler: DeliveryHandler, settings: ConsumerSettings) {
  const { prefetch, models, pollMs, minAgeMs = 0 } = settings;
  let stopped = false;
  let unsettled = 0;
  let drained: (() => void) | undefined;
  // A wake that arrives while a claim is running must not be lost, hence the flag.
  let woken = false;
  let interrupt: (() => void) | undefined;

  const wake = () => {
    woken = true;
    interrupt?.();
  };
  const onPublish = (model: string) => {
    if (!models || models.includes(model)) wake();
  };
  // A publish is never old enough for an overflow consumer: it finds ripe messages by polling.
  if (minAgeMs === 0) ctx.wakers.add(onPublish);

  /** Waits `ms` or until woken; says whether it was woken. */
  const pause = (ms: number) =>
    new Promise<boolean>((resolve) => {
      if (woken || stopped) return resolve(true);
      const timer = setTimeout(() => finish(false), ms);
      const finish = (early: boolean) => {
        clearTimeout(timer);
        interrupt = undefined;
        resolve(early);
      };
      interrupt = () => finish(true);
    });

  const release = () => {
    unsettled -= 1;
    if (unsettled === 0) drained?.();
    wake();
  };

  const dispatch = (row: Row) => {
    unsettled += 1;
    let held = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const slot: Slot = {
      free() {
        if (!held) return;
        held = false;
        clearTimeout(timer);
        release();
      },
      holdFor(ms: number) {
        if (!held) return;
        clearTimeout(timer);
        timer = setTimeout(() => slot.free(), ms);
      },
    };
    slot.holdFor(ctx.limits.leaseMs);
    const message = parseBody(row.body);
    if (!message) {
      // Nothing could ever process it; keep it for inspection rather than redeliver forever.
      const error: JobError = { type: "permanent", code: "invalid_message", message: row.body };
      updateLeased(ctx.db, row, dead(error)).catch(ctx.onError).finally(slot.free);
      return;
    }
    const delivery = createDelivery(ctx, row, message, slot);
    Promise.resolve()
      .then(() => handler(delivery))
      .catch(ctx.onError);
  };

  const loop = async () => {
    let interval = pollMs;
    while (!stopped) {
      woken = false;
      const free = prefetch - unsettled;
      if (free <= 0) {
        await pause(IDLE_POLL_MS);
        continue;
      }
      let rows: Row[] = [];
      try {
        rows = await claim(ctx, models, free, minAgeMs);
      } catch (error) {
        ctx.onError(error);
      }
      for (const row of rows) dispatch(row);
      if (rows.length === free) continue;
      interval = rows.length > 0 ? pollMs : Math.min(interval * 2, IDLE_POLL_MS);
      if (await pause(interval)) interval = pollMs;
    }
  };
  const running = loop();

  let stopping: Promise<void> | undefined;
  return {
    stop() {
      stopping ??= (async () => {
        stopped = true;
        ctx.wakers.delete(onPublish);
        interrupt?.();
        await running;
        if (unsettled > 0) await new Promise<void>((resolve) => (drained = resolve));
      })();
      return stopping;
    },
  };
}

interface Slot {
  free(): void;
  holdFor(ms: number): void;
}

type LeasedUpdate = Partial<Omit<Row, "seq">>;

/** An update that applies only while `row`'s lease is still the one it was claimed with. */
async function updateLeased(db: Kysely<Database>, row: Row, values: LeasedUpdate) {
  const result = await db
    .updateTable("queue_messages")
    .set(values)
    .where("seq", "=", Number(row.seq))
    .where("lease_token", "=", row.lease_token ?? "")
    .executeTakeFirst();
  return BigInt(result.numUpdatedRows);
}

function createDelivery(ctx: Context, row: Row, message: QueueMessage, slot: Slot): Delivery {
  const { db, limits } = ctx;
  const attempt = Number(row.attempts);
  /** Frees the slot once the database answered; no changed row means the lease was lost. */
  const settle = async (changedRows: Promise<bigint>) => {
    const changed = await changedRows;
    slot.free();
    if (changed === 0n) throw new LeaseLostError(row.job_id);
  };
  const deadLetter = (error: JobError) => settle(updateLeased(db, row, dead(error)));

  return {
    message,
    attempt,
    async ack() {
      const deleted = db
        .deleteFrom("queue_messages")
        .where("seq", "=", Number(row.seq))
        .where("lease_token", "=", row.lease_token ?? "")
        .executeTakeFirst();
      await settle(deleted.then((result) => BigInt(result.numDeletedRows)));
    },
    async retry(delayMs: number, error: JobError): Promise<RetryOutcome> {
      if (attempt >= limits.maxAttempts) {
        await deadLetter(error);
        return "dead-lettered";
      }
      const delay = Math.max(0, delayMs);
      const release = {
        available_at: ctx.clock() + delay,
        lease_token: null,
        lease_expires_at: null,
      };
      await settle(updateLeased(db, row, { ...release, error: storeError(error) }));
      if (delay === 0) for (const wake of ctx.wakers) wake(row.queue);
      return "retried";
    },
    deadLetter,
    async extendLease(ms: number) {
      const changed = await updateLeased(db, row, { lease_expires_at: ctx.clock() + ms });
      if (changed > 0n) return slot.holdFor(ms);
      slot.free();
      throw new LeaseLostError(row.job_id);
    },
  };
}
