import type { ExpressionBuilder, Kysely, RawBuilder, Selectable } from "kysely";
import { sql } from "kysely";
import type { Database, QueueMessageTable } from "../db/schema.ts";
import { randomToken } from "../ids.ts";
import { JobError, QueueMessage } from "../protocol/index.ts";
import {
  type ConsumeOptions,
  type Consumer,
  DEFAULT_QUEUE_LIMITS,
  type DeadLetter,
  type Delivery,
  type DeliveryHandler,
  type JobQueue,
  LeaseLostError,
  type PublishOptions,
  type QueueDepth,
  type QueueLimits,
  type RetryOutcome,
} from "./port.ts";

// Kept for importers from before the class moved to the port.
export { LeaseLostError } from "./port.ts";

/**
 * The `sql` JobQueue: the `queue_messages` table, one logical queue per model. Every
 * operation is a single statement (no interactive transactions) so the same code runs on
 * SQLite, Postgres and D1. A delivery holds a lease (`lease_token`, `lease_expires_at`);
 * settling is guarded by the token, so a consumer whose lease ran out and was claimed again
 * cannot touch the newer delivery.
 *
 * Settling (ack, retry, deadLetter) or extending through a lost lease changes nothing and
 * rejects with `LeaseLostError`; the delivery's prefetch slot is freed either way.
 */
export interface SqlQueueOptions {
  dialect: "sqlite" | "postgres";
  limits?: Partial<QueueLimits>;
  /** Poll interval while messages flow; idle polls back off to `IDLE_POLL_MS`. */
  pollIntervalMs?: number;
  /** Instants written to the table. Lease timers for prefetch slots use real time. */
  clock?: () => number;
  /** Told about handler errors and failed polls; neither stops a consumer. */
  onError?: (error: unknown) => void;
}

export type SqlQueue = JobQueue & { deadLetters(model?: string): Promise<DeadLetter[]> };

const IDLE_POLL_MS = 500;
type Row = Selectable<QueueMessageTable>;
type Where = ExpressionBuilder<Database, "queue_messages">;

/**
 * Publishes wake local pollers at once instead of at their next poll. Keyed by the Kysely
 * instance so every queue built on one database shares it.
 */
const wakersByDb = new WeakMap<object, Set<(model: string) => void>>();

interface Context {
  db: Kysely<Database>;
  postgres: boolean;
  limits: QueueLimits;
  clock: () => number;
  wakers: Set<(model: string) => void>;
  onError: (error: unknown) => void;
}

export function createSqlQueue(db: Kysely<Database>, options: SqlQueueOptions): SqlQueue {
  const wakers = wakersByDb.get(db) ?? new Set();
  wakersByDb.set(db, wakers);
  const ctx: Context = {
    db,
    postgres: options.dialect === "postgres",
    limits: { ...DEFAULT_QUEUE_LIMITS, ...options.limits },
    clock: options.clock ?? Date.now,
    wakers,
    onError: options.onError ?? ((error) => console.error("gantry sql queue:", error)),
  };
  const pollMs = options.pollIntervalMs ?? 50;
  const consumers = new Set<Consumer>();
  let closed = false;
  const assertOpen = () => {
    if (closed) throw new Error("the queue is closed");
  };

  return {
    async publish(message: QueueMessage, publishOptions?: PublishOptions) {
      assertOpen();
      const valid = QueueMessage.parse(message);
      const now = ctx.clock();
      await db
        .insertInto("queue_messages")
        .values({
          queue: valid.model,
          job_id: valid.id,
          body: JSON.stringify(valid),
          priority: valid.priority,
          available_at: now + Math.max(0, publishOptions?.delayMs ?? 0),
          attempts: 0,
          state: "ready",
          created_at: now,
        })
        .execute();
      for (const wake of ctx.wakers) wake(valid.model);
    },

    async consume(handler: DeliveryHandler, consumeOptions: ConsumeOptions) {
      assertOpen();
      const { prefetch, models } = consumeOptions;
      if (!Number.isInteger(prefetch) || prefetch < 1) throw new Error("prefetch must be >= 1");
      if (models?.length === 0)
        throw new Error("models must name at least one model, or be omitted");
      const consumer = startConsumer(ctx, handler, { prefetch, models, pollMs });
      consumers.add(consumer);
      return {
        async stop() {
          consumers.delete(consumer);
          await consumer.stop();
        },
      };
    },

    async depth(model?: string): Promise<QueueDepth> {
      const now = ctx.clock();
      let query = db.selectFrom("queue_messages");
      if (model !== undefined) query = query.where("queue", "=", model);
      const free = sql`state = 'ready' and (lease_expires_at is null or lease_expires_at <= ${now})`;
      const count = (when: RawBuilder<unknown>) =>
        sql<string | number | null>`sum(case when ${when} then 1 else 0 end)`;
      const row = await query
        .select([
          count(sql`${free} and available_at <= ${now}`).as("ready"),
          count(sql`state = 'ready' and lease_expires_at > ${now}`).as("in_flight"),
          count(sql`${free} and available_at > ${now}`).as("delayed"),
          count(sql`state = 'dead'`).as("dead"),
        ])
        .executeTakeFirst();
      // Postgres sums are bigint, which the driver returns as text; empty sums are null.
      return {
        ready: Number(row?.ready ?? 0),
        inFlight: Number(row?.in_flight ?? 0),
        delayed: Number(row?.delayed ?? 0),
        dead: Number(row?.dead ?? 0),
      };
    },

    async deadLetters(model?: string): Promise<DeadLetter[]> {
      let query = db
        .selectFrom("queue_messages")
        .select(["body", "attempts", "error"])
        .where("state", "=", "dead");
      if (model !== undefined) query = query.where("queue", "=", model);
      const rows = await query.orderBy("seq").execute();
      // A body that is not a valid message can only come from outside `publish`; it stays in
      // the table for a person to look at but cannot be returned as a QueueMessage.
      return rows.flatMap((row) => {
        const message = parseBody(row.body);
        return message
          ? [{ message, attempts: Number(row.attempts), error: parseError(row.error) }]
          : [];
      });
    },

    async close() {
      closed = true;
      await Promise.all([...consumers].map((consumer) => consumer.stop()));
      consumers.clear();
    },
  };
}

/** Rows a consumer may take now: ready, due, and not leased (or the lease ran out). */
function due(now: number, models: readonly string[] | undefined) {
  return (eb: Where) => {
    const conditions = [
      eb("state", "=", "ready"),
      eb("available_at", "<=", now),
      eb.or([eb("lease_expires_at", "is", null), eb("lease_expires_at", "<=", now)]),
    ];
    if (models) conditions.push(eb("queue", "in", models));
    return eb.and(conditions);
  };
}

/**
 * Takes up to `limit` messages. A read comes first so an idle poll never takes SQLite's
 * one write lock; then messages whose every attempt was spent without a settle (the
 * consumer kept dying) are dead-lettered, and the rest are leased in one statement.
 */
async function claim(ctx: Context, models: readonly string[] | undefined, limit: number) {
  const { db, limits } = ctx;
  const now = ctx.clock();
  const peek = await db
    .selectFrom("queue_messages")
    .select("attempts")
    .where(due(now, models))
    .orderBy("priority", "desc")
    .orderBy("seq")
    .limit(limit)
    .execute();
  if (peek.length === 0) return [];
  if (peek.some((row) => row.attempts >= limits.maxAttempts)) {
    const error: JobError = {
      type: "transient",
      code: "max_attempts_exceeded",
      message: `delivered ${limits.maxAttempts} times without being settled: the consumer died or overran its lease`,
    };
    await db
      .updateTable("queue_messages")
      .set(dead(error))
      .where(due(now, models))
      .where("attempts", ">=", limits.maxAttempts)
      .execute();
  }
  let pick = db
    .selectFrom("queue_messages")
    .select("seq")
    .where(due(now, models))
    .where("attempts", "<", limits.maxAttempts)
    .orderBy("priority", "desc")
    .orderBy("seq")
    .limit(limit);
  // Concurrent Postgres consumers skip each other's candidate rows instead of queueing on them.
  if (ctx.postgres) pick = pick.forUpdate().skipLocked();
  const rows = await db
    .updateTable("queue_messages")
    .set((eb) => ({
      lease_token: randomToken(12),
      lease_expires_at: now + limits.leaseMs,
      attempts: eb("attempts", "+", 1),
    }))
    .where("seq", "in", pick)
    .returningAll()
    .execute();
  // RETURNING has no order; hand them out in queue order.
  return rows.sort((a, b) => b.priority - a.priority || Number(a.seq) - Number(b.seq));
}

interface ConsumerSettings {
  prefetch: number;
  models: readonly string[] | undefined;
  pollMs: number;
}

/**
 * A polling loop that never holds more than `prefetch` unsettled deliveries. A slot frees
 * when its delivery is settled or when its lease runs out (the message is then someone
 * else's), so a handler that throws or forgets to settle cannot wedge the consumer.
 */
function startConsumer(ctx: Context, handler: DeliveryHandler, settings: ConsumerSettings) {
  const { prefetch, models, pollMs } = settings;
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
  ctx.wakers.add(onPublish);

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
        rows = await claim(ctx, models, free);
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

/** The columns that move a message to the dead-letter store. */
function dead(error: JobError) {
  return { state: "dead", error: storeError(error), lease_token: null, lease_expires_at: null };
}

/** Errors are stored as JobError JSON, clipped to the schema's limits rather than refused. */
function storeError(error: JobError): string {
  return JSON.stringify({
    type: error.type === "permanent" ? "permanent" : "transient",
    code: String(error.code).slice(0, 64) || "unknown",
    message: String(error.message).slice(0, 2000),
  });
}

function parseError(raw: string | null): JobError {
  const fallback: JobError = { type: "transient", code: "unknown", message: raw ?? "" };
  if (raw === null) return fallback;
  try {
    return JobError.safeParse(JSON.parse(raw)).data ?? fallback;
  } catch {
    return fallback;
  }
}

function parseBody(body: string): QueueMessage | undefined {
  try {
    return QueueMessage.safeParse(JSON.parse(body)).data;
  } catch {
    return undefined;
  }
}
