import { type RawBuilder, sql } from "kysely";
import { randomToken } from "../../ids.ts";
import type { QueueMessage } from "../../protocol/index.ts";
import type { Context, Row } from "./claim.ts";
import type { Waiter, Waiters } from "./waiter.ts";

/**
 * Inserts messages in their order (one statement: `seq` follows the rows), those a waiter
 * has room for leased to it (highest priority first, as a claim takes them). Wakes this
 * process's pollers for the models whose messages were not all handed out.
 */
export async function insertMessages(
  ctx: Context,
  messages: readonly QueueMessage[],
  delayMs: number,
): Promise<void> {
  if (messages.length === 0) return;
  const now = ctx.clock();
  const availableAt = now + Math.max(0, delayMs);
  const plan = delayMs > 0 ? [] : planHandOff(ctx.waiters, messages);
  const tokens = new Map<Waiter, string>();
  // SQL text, not the builder: a publish a job at ordinary load (claim.ts, `due`).
  const rows = messages.map((message, i): RawBuilder<unknown> => {
    const waiter = plan[i];
    const lease = waiter ? (tokens.get(waiter) ?? randomToken(12)) : null;
    if (waiter && lease) tokens.set(waiter, lease);
    // At most 8 parameters a row (the lease's two only when handed): see publishMany.
    // The waiter's own lease: queues on one database may have different ones.
    const leased = waiter && lease ? sql`1, ${lease}, ${now + waiter.leaseMs}` : sql`0, NULL, NULL`;
    return sql`(${message.model}, ${message.id}, ${JSON.stringify(message)},
      ${message.priority}, ${availableAt}, 'ready', ${now}, ${leased})`;
  });
  const handing = tokens.size > 0;
  let inserted: Row[] = [];
  try {
    const result = await sql<Row>`INSERT INTO queue_messages
      (queue, job_id, body, priority, available_at, state, created_at,
       attempts, lease_token, lease_expires_at)
      VALUES ${sql.join(rows)}${handing ? sql` RETURNING *` : sql``}`.execute(ctx.db);
    inserted = result.rows;
  } finally {
    // On a failed insert each waiter hears it has none, and looks again at its next poll.
    for (const [waiter, token] of tokens) {
      const promised = plan.filter((planned) => planned === waiter).length;
      const own = inserted.filter((row) => row.lease_token === token);
      // RETURNING has no order; hand them out in queue order.
      own.sort((a, b) => b.priority - a.priority || Number(a.seq) - Number(b.seq));
      waiter.settle(promised, own);
    }
  }
  const ready = new Set(messages.filter((_, i) => !plan[i]).map((message) => message.model));
  for (const model of ready) for (const wake of ctx.wakers) wake(model);
}

/** Which waiter each message goes to (none: inserted ready), promised as it is planned. */
function planHandOff(waiters: Waiters, messages: readonly QueueMessage[]): (Waiter | undefined)[] {
  const plan: (Waiter | undefined)[] = [];
  if (waiters.size === 0) return plan;
  // Highest priority first; the sort is stable, so publish order within a priority.
  const order = messages.map((_, i) => i);
  order.sort((a, b) => (messages[b]?.priority ?? 0) - (messages[a]?.priority ?? 0));
  for (const i of order) {
    const model = messages[i]?.model ?? "";
    for (const waiter of waiters) {
      if (!waiter.serves(model) || waiter.room() <= 0) continue;
      waiter.promise(1);
      plan[i] = waiter;
      break;
    }
  }
  return plan;
}
