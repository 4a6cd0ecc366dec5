import { type Kysely, type RawBuilder, type Selectable, type SqlBool, sql } from "kysely";
import { limitClause } from "../../db/inline-limits.ts";
import type { Database, QueueMessageTable } from "../../db/schema.ts";
import { randomToken } from "../../ids.ts";
import { JobError, QueueMessage } from "../../protocol/index.ts";
import type { QueueLimits } from "../port.ts";
import type { Waiters } from "./waiter.ts";

/** What the `sql` queue's parts share: claiming, row helpers and the queue's settings. */
export const IDLE_POLL_MS = 500;
export type Row = Selectable<QueueMessageTable>;

export interface Context {
  db: Kysely<Database>;
  postgres: boolean;
  limits: QueueLimits;
  clock: () => number;
  wakers: Set<(model: string) => void>;
  /** Consumers of this process waiting with room: a publish leases to them (hand-off.ts). */
  waiters: Waiters;
  onError: (error: unknown) => void;
  /** Deletes a delivery while its lease is still the one given; 1n when it did (leases.ts). */
  ack: (lease: { seq: number; token: string }) => Promise<bigint>;
}

/**
 * Rows a consumer may take now: ready, due, and not leased (or the lease ran out). An
 * overflow consumer (`minAgeMs`) takes only rows that have been due that long: the claim
 * predicate is on `available_at`, when the message became ready (its publish, or the end
 * of its retry delay), so the time counted is time spent waiting for a consumer.
 *
 * The claim's statements are SQL text with bound values, not Kysely's builder: a consumer
 * at ordinary load claims once or twice a job, and building each statement node by node
 * was a twentieth of the embedded gateway's busy time at 200 jobs/s (issue 29), more than
 * running them. An empty `models` matches nothing (`IN ()` is no SQL on Postgres).
 */
function due(
  now: number,
  models: readonly string[] | undefined,
  minAgeMs = 0,
): RawBuilder<SqlBool> {
  const queues =
    models === undefined
      ? sql``
      : models.length > 0
        ? sql` AND queue IN (${sql.join([...models])})`
        : sql` AND 1 = 0`;
  return sql<SqlBool>`state = 'ready' AND available_at <= ${now - minAgeMs}
    AND (lease_expires_at IS NULL OR lease_expires_at <= ${now})${queues}`;
}

/**
 * Takes up to `limit` messages. A read comes first so an idle poll never takes SQLite's
 * one write lock (`deadLetterSpent`); then the rest are leased in one statement.
 *
 * `read: false` skips the read, and the dead-lettering with it: for a claim a publish woke,
 * which expects a message and would take the write lock anyway (a statement less a job at
 * ordinary load). The lease leaves spent messages alone, so the next claim that reads
 * dead-letters them; callers read at least every `IDLE_POLL_MS`.
 */
export async function claim(
  ctx: Context,
  models: readonly string[] | undefined,
  limit: number,
  minAgeMs = 0,
  read = true,
) {
  const { db, limits } = ctx;
  const now = ctx.clock();
  if (read && !(await deadLetterSpent(ctx, models, limit, minAgeMs, now))) return [];
  // Concurrent Postgres consumers skip each other's candidate rows instead of queueing on them.
  const lock = ctx.postgres ? sql` FOR UPDATE SKIP LOCKED` : sql``;
  const { rows } = await sql<Row>`
    UPDATE queue_messages
    SET lease_token = ${randomToken(12)}, lease_expires_at = ${now + limits.leaseMs},
        attempts = attempts + 1
    WHERE seq IN (
      SELECT seq FROM queue_messages
      WHERE ${due(now, models, minAgeMs)} AND attempts < ${limits.maxAttempts}
      ORDER BY priority DESC, seq ${limitClause(limit)}${lock})
    RETURNING *`.execute(db);
  // RETURNING has no order; hand them out in queue order.
  return rows.sort((a, b) => b.priority - a.priority || Number(a.seq) - Number(b.seq));
}

/**
 * The read before a claim: false when nothing is due (the claim then takes no lock). Due
 * messages whose every attempt was spent without a settle (the consumer kept dying) are
 * dead-lettered on the way.
 */
async function deadLetterSpent(
  ctx: Context,
  models: readonly string[] | undefined,
  limit: number,
  minAgeMs: number,
  now: number,
): Promise<boolean> {
  const { db, limits } = ctx;
  const { rows: peek } = await sql<{ attempts: number }>`
    SELECT attempts FROM queue_messages WHERE ${due(now, models, minAgeMs)}
    ORDER BY priority DESC, seq ${limitClause(limit)}`.execute(db);
  if (peek.length === 0) return false;
  if (peek.some((row) => row.attempts >= limits.maxAttempts)) {
    const error: JobError = {
      type: "transient",
      code: "max_attempts_exceeded",
      message: `delivered ${limits.maxAttempts} times without being settled: the consumer died or overran its lease`,
    };
    await db
      .updateTable("queue_messages")
      .set(dead(error))
      .where(due(now, models, minAgeMs))
      .where("attempts", ">=", limits.maxAttempts)
      .execute();
  }
  return true;
}

/** The columns that move a message to the dead-letter store. */
export function dead(error: JobError) {
  return { state: "dead", error: storeError(error), lease_token: null, lease_expires_at: null };
}

/** Errors are stored as JobError JSON, clipped to the schema's limits rather than refused. */
export function storeError(error: JobError): string {
  return JSON.stringify({
    type: error.type === "permanent" ? "permanent" : "transient",
    code: String(error.code).slice(0, 64) || "unknown",
    message: String(error.message).slice(0, 2000),
  });
}

export function parseError(raw: string | null): JobError {
  const fallback: JobError = { type: "transient", code: "unknown", message: raw ?? "" };
  if (raw === null) return fallback;
  try {
    return JobError.safeParse(JSON.parse(raw)).data ?? fallback;
  } catch {
    return fallback;
  }
}

export function parseBody(body: string): QueueMessage | undefined {
  try {
    return QueueMessage.safeParse(JSON.parse(body)).data;
  } catch {
    return undefined;
  }
}
