import type { Kysely, RawBuilder } from "kysely";
import { sql } from "kysely";
import type { Database } from "../../db/schema.ts";
import { QueueMessage } from "../../protocol/index.ts";
import { type ConsumeAbilities, ConsumerSet, checkConsume } from "../consumers.ts";
import {
  type ConsumeOptions,
  DEFAULT_QUEUE_LIMITS,
  type DeadLetter,
  type DeliveryHandler,
  type JobQueue,
  type PublishOptions,
  type QueueDepth,
  type QueueLimits,
} from "../port.ts";

import { type Context, parseBody, parseError } from "./claim.ts";
import { startConsumer } from "./consumer.ts";
import { insertMessages } from "./hand-off.ts";
import { createQueueLeases, leasedAcks, type QueueLeases } from "./leases.ts";
import type { Waiters } from "./waiter.ts";

// Kept for importers from before the class moved to the port.
export { LeaseLostError } from "../port.ts";

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
  /**
   * Requests must not share a statement (Workers: one request's I/O may not settle another
   * request's promise): every ack is its own.
   */
  isolatedRequests?: boolean;
}

export type { LeasedMessage, QueueLeases, TakeRequest } from "./leases.ts";

export type SqlQueue = JobQueue & {
  publishMany(messages: readonly QueueMessage[]): Promise<void>;
  deadLetters(model?: string): Promise<DeadLetter[]>;
  /** The same messages leased by receipt, for consumers in other processes (agents). */
  readonly leases: QueueLeases;
};

/**
 * Publishes wake local pollers at once instead of at their next poll. Keyed by the Kysely
 * instance so every queue built on one database shares it.
 */
const wakersByDb = new WeakMap<object, Set<(model: string) => void>>();
const waitersByDb = new WeakMap<object, Waiters>();

const SQL_CONSUME: ConsumeAbilities = { transport: "sql", needsModels: false, overflow: true };

export function createSqlQueue(db: Kysely<Database>, options: SqlQueueOptions): SqlQueue {
  const wakers = wakersByDb.get(db) ?? new Set();
  wakersByDb.set(db, wakers);
  const waiters = waitersByDb.get(db) ?? new Set();
  waitersByDb.set(db, waiters);
  const ctx: Context = {
    db,
    postgres: options.dialect === "postgres",
    limits: { ...DEFAULT_QUEUE_LIMITS, ...options.limits },
    clock: options.clock ?? Date.now,
    wakers,
    waiters,
    onError: options.onError ?? ((error) => console.error("gantry sql queue:", error)),
    ack: leasedAcks(db, options.isolatedRequests ?? false),
  };
  const pollMs = options.pollIntervalMs ?? 50;
  const consumers = new ConsumerSet();
  let closed = false;
  const assertOpen = () => {
    if (closed) throw new Error("the queue is closed");
  };

  return {
    leases: createQueueLeases(ctx),

    async publish(message: QueueMessage, publishOptions?: PublishOptions) {
      assertOpen();
      await insertMessages(ctx, [QueueMessage.parse(message)], publishOptions?.delayMs ?? 0);
    },

    async publishMany(messages: readonly QueueMessage[]) {
      assertOpen();
      const valid = messages.map((message) => QueueMessage.parse(message));
      // Rows a statement carries: at most 8 parameters each (hand-off.ts), within D1's 100
      // (SQLite shares the dialect).
      const perStatement = ctx.postgres ? 1_000 : 12;
      for (let i = 0; i < valid.length; i += perStatement) {
        await insertMessages(ctx, valid.slice(i, i + perStatement), 0);
      }
    },

    async consume(handler: DeliveryHandler, consumeOptions: ConsumeOptions) {
      assertOpen();
      const { prefetch, models, minAgeMs, refillAt } = checkConsume(consumeOptions, SQL_CONSUME);
      return consumers.add(
        startConsumer(ctx, handler, { prefetch, models, pollMs, minAgeMs, refillAt }),
      );
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
      await consumers.stopAll();
    },
  };
}
