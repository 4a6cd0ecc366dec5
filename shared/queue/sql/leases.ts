import { type Kysely, sql } from "kysely";
import type { Database } from "../../db/schema.ts";
import { naturalBatcher } from "../../natural-batch.ts";
import type { JobError, QueueMessage } from "../../protocol/index.ts";
import { unreadableError } from "../lease.ts";
import type { QueueLimits, RetryOutcome } from "../port.ts";
import {
  type Context,
  claim,
  dead,
  IDLE_POLL_MS,
  parseBody,
  type Row,
  storeError,
} from "./claim.ts";
import { Waiter } from "./waiter.ts";

/**
 * The `sql` queue's leases by receipt, for a consumer that is not in this process: the
 * gateway serves them to agents that hold no database URL (gateway/jobs/agent-queue-ops.ts).
 * A receipt (`<seq>.<lease token>`) names one delivery; every settle is guarded by the
 * token exactly as the in-process consumer's is (consumer.ts), so a delivery whose lease ran
 * out and was taken again cannot touch the newer one. Each call answers whether it applied
 * (`false`, `"lost"`: the lease was lost) rather than throwing: the caller turns that into
 * its own `LeaseLostError` for the job it knows.
 */
export interface QueueLeases {
  readonly limits: QueueLimits;
  /** Leases up to `max` messages; with `waitMs`, waits that long for one to come. */
  take(request: TakeRequest): Promise<LeasedMessage[]>;
  ack(receipt: string): Promise<boolean>;
  retry(receipt: string, delayMs: number, error: JobError): Promise<RetryOutcome | "lost">;
  deadLetter(receipt: string, error: JobError): Promise<boolean>;
  extend(receipt: string, ms: number): Promise<boolean>;
  /**
   * Ready again at once, its attempt not spent: a delivery that never reached its consumer
   * (the agent went away while its take was answered).
   */
  giveBack(receipt: string): Promise<boolean>;
}

export interface TakeRequest {
  models: readonly string[] | undefined;
  max: number;
  /** Overflow consumers: only messages ready this long. */
  minAgeMs?: number;
  /** How long to wait for a message when none is ready; 0 answers at once. */
  waitMs?: number;
  /** Ends the wait early (the caller went away): what was leased is still returned. */
  signal?: AbortSignal;
  /**
   * Wake on this process's publishes instead of finding them at the next poll. Off where a
   * request may not be woken by another's I/O (Workers).
   */
  wake?: boolean;
}

export interface LeasedMessage {
  receipt: string;
  /** 1 on first delivery, as `Delivery.attempt`. */
  attempt: number;
  message: QueueMessage;
}

/** The first wait between polls while a take waits; it doubles up to `IDLE_POLL_MS`. */
const FIRST_POLL_MS = 50;

export function createQueueLeases(ctx: Context): QueueLeases {
  const { db, limits } = ctx;
  return {
    limits,
    take: (request) => take(ctx, request),
    async ack(receipt) {
      const lease = parseReceipt(receipt);
      return lease ? (await ctx.ack(lease)) > 0n : false;
    },
    async retry(receipt, delayMs, error) {
      const lease = parseReceipt(receipt);
      if (!lease) return "lost";
      // The attempt is the row's own count, never the caller's word for it.
      const released = await releaseLeased(ctx, lease, delayMs, error, limits.maxAttempts);
      if (released > 0n) return "retried";
      return (await updateLeased(db, lease, dead(error))) > 0n ? "dead-lettered" : "lost";
    },
    async deadLetter(receipt, error) {
      const lease = parseReceipt(receipt);
      return lease ? (await updateLeased(db, lease, dead(error))) > 0n : false;
    },
    async extend(receipt, ms) {
      const lease = parseReceipt(receipt);
      if (!lease) return false;
      return (await updateLeased(db, lease, { lease_expires_at: ctx.clock() + ms })) > 0n;
    },
    async giveBack(receipt) {
      const lease = parseReceipt(receipt);
      return lease ? (await giveBackLeased(ctx, lease)) > 0n : false;
    },
  };
}

/** Ready again at once, its attempt unspent (QueueLeases.giveBack, Delivery.giveBack). */
export async function giveBackLeased(ctx: Context, lease: Lease): Promise<bigint> {
  const result = await ctx.db
    .updateTable("queue_messages")
    .set({ lease_token: null, lease_expires_at: null, attempts: sql`attempts - 1` })
    .where("seq", "=", lease.seq)
    .where("lease_token", "=", lease.token)
    .returning("queue")
    .executeTakeFirst();
  if (result) for (const wake of ctx.wakers) wake(result.queue);
  return result ? 1n : 0n;
}

async function take(ctx: Context, request: TakeRequest): Promise<LeasedMessage[]> {
  const { models, max, minAgeMs = 0, waitMs = 0, signal } = request;
  const deadline = Date.now() + waitMs;
  let woken = false;
  let interrupt: (() => void) | undefined;
  const onPublish = (model: string) => {
    if (models && !models.includes(model)) return;
    woken = true;
    interrupt?.();
  };
  const onAbort = () => interrupt?.();
  // Listening before the first claim: a publish between the claim and the wait is not missed.
  const wake = request.wake !== false && minAgeMs === 0;
  if (wake) ctx.wakers.add(onPublish);
  signal?.addEventListener("abort", onAbort);
  // While it waits, a publish may lease to it directly (hand-off.ts): the rows come here.
  const handed: Row[] = [];
  const waiter = new Waiter(
    ctx.limits.leaseMs,
    models,
    () => max - handed.length,
    (rows) => {
      handed.push(...rows);
      interrupt?.();
    },
  );
  try {
    let interval = FIRST_POLL_MS;
    for (;;) {
      if (handed.length > 0) return await leasedOf(ctx, handed);
      // A claim a publish woke skips its read (claim.ts); a take's first claim reads.
      const read = !woken;
      woken = false;
      const rows = await claim(ctx, models, max, minAgeMs, read);
      if (rows.length > 0) {
        const leased = await leasedOf(ctx, rows);
        if (leased.length > 0) return leased;
        continue;
      }
      const left = deadline - Date.now();
      if (left <= 0 || signal?.aborted) return [];
      if (!woken) {
        if (wake) ctx.waiters.add(waiter);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.min(interval, left));
          function done() {
            clearTimeout(timer);
            interrupt = undefined;
            resolve();
          }
          interrupt = done;
        });
        ctx.waiters.delete(waiter);
        // A publish under way may have promised it rows: they are leased to it, so wait.
        await waiter.settled();
      }
      interval = Math.min(interval * 2, IDLE_POLL_MS);
    }
  } finally {
    if (wake) ctx.wakers.delete(onPublish);
    ctx.waiters.delete(waiter);
    signal?.removeEventListener("abort", onAbort);
  }
}

/** Rows leased to a take as its deliveries; one whose body is unreadable is dead-lettered. */
async function leasedOf(ctx: Context, rows: readonly Row[]): Promise<LeasedMessage[]> {
  const leased: LeasedMessage[] = [];
  for (const row of rows) {
    const message = parseBody(row.body);
    if (message) leased.push({ receipt: receiptOf(row), attempt: Number(row.attempts), message });
    // Nothing could ever process it; kept for inspection rather than delivered forever.
    else await updateLeased(ctx.db, leaseOf(row), dead(unreadableError(row.body)));
  }
  return leased;
}

/** One delivery of one row: its sequence number and the lease token it was claimed with. */
export interface Lease {
  seq: number;
  token: string;
}

export const leaseOf = (row: Row): Lease => ({
  seq: Number(row.seq),
  token: row.lease_token ?? "",
});
const receiptOf = (row: Row) => `${row.seq}.${row.lease_token ?? ""}`;

function parseReceipt(receipt: string): Lease | undefined {
  const match = /^(\d{1,18})\.([A-Za-z0-9_-]{1,64})$/.exec(receipt);
  return match ? { seq: Number(match[1]), token: match[2] ?? "" } : undefined;
}

type LeasedUpdate = Partial<Omit<Row, "seq">>;

/** An update that applies only while the lease is still the one it was claimed with. */
export async function updateLeased(db: Kysely<Database>, lease: Lease, values: LeasedUpdate) {
  const result = await db
    .updateTable("queue_messages")
    .set(values)
    .where("seq", "=", lease.seq)
    .where("lease_token", "=", lease.token)
    .executeTakeFirst();
  return BigInt(result.numUpdatedRows);
}

/** Leases one ack statement carries at most: two parameters each, within D1's 100. */
const ACKS_PER_STATEMENT = 50;

/**
 * Acks (deletes) leased messages, those that arrive together in one statement each
 * (natural batching: a lone ack goes at once). One commit per ack was most of a draining
 * agent's time on Postgres, each waiting its turn to flush the WAL (issue 29: 40 % of the
 * database's busy samples while one agent drained a 100 000-job backlog). Each lease still
 * deletes only its own delivery: the pair (seq, lease token) is matched whole. `direct`:
 * one statement per ack, never shared (Workers, where a request may not settle another's).
 */
export function leasedAcks(
  db: Kysely<Database>,
  direct: boolean,
): (lease: Lease) => Promise<bigint> {
  const batcher = naturalBatcher<Lease, bigint>(
    async (leases) => {
      const deleted = new Set<string>();
      for (let i = 0; i < leases.length; i += ACKS_PER_STATEMENT) {
        const part = leases.slice(i, i + ACKS_PER_STATEMENT);
        // SQL text, not the builder: an ack a job at ordinary load (claim.ts, `due`).
        const pairs = sql.join(part.map((lease) => sql`(${lease.seq}, ${lease.token})`));
        const { rows } = await sql<{ seq: number | string; lease_token: string | null }>`
          DELETE FROM queue_messages WHERE (seq, lease_token) IN (${pairs})
          RETURNING seq, lease_token`.execute(db);
        for (const row of rows) deleted.add(`${row.seq}.${row.lease_token}`);
      }
      return leases.map((lease) => (deleted.has(`${lease.seq}.${lease.token}`) ? 1n : 0n));
    },
    { direct, maxBatch: 10 * ACKS_PER_STATEMENT },
  );
  return (lease) => batcher.add(lease);
}

/**
 * Makes the message ready again after `delayMs`, while its attempts are below `below`;
 * publishes wake this process's consumers when there is no delay.
 */
export async function releaseLeased(
  ctx: Context,
  lease: Lease,
  delayMs: number,
  error: JobError,
  below: number,
) {
  const delay = Math.max(0, delayMs);
  const result = await ctx.db
    .updateTable("queue_messages")
    .set({
      available_at: ctx.clock() + delay,
      lease_token: null,
      lease_expires_at: null,
      error: storeError(error),
    })
    .where("seq", "=", lease.seq)
    .where("lease_token", "=", lease.token)
    .where("attempts", "<", below)
    .returning("queue")
    .executeTakeFirst();
  if (result && delay === 0) for (const wake of ctx.wakers) wake(result.queue);
  return result ? 1n : 0n;
}
