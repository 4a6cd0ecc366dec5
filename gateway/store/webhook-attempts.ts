import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import type { WebhookAttemptReason } from "../../shared/protocol/webhook-api.ts";
import type { DeliveryState, DueDelivery } from "./webhook-deliveries.ts";

/**
 * The rows of one attempt at one delivery: claiming it, and recording how it went. The
 * sending between the two is gateway/webhooks/attempt.ts's.
 *
 * Claiming: `attempts` doubles as a version number. A sender claims the next attempt with a
 * conditional UPDATE (`attempts = seen` → `seen + 1`) that also pushes `next_attempt_at`
 * out by a lease; only one of two concurrent senders can win it, and the attempt number it
 * won keys the attempt row. If a sender dies mid-attempt, the lease runs out and the next
 * sweep tries again (that lost attempt still counts toward the schedule: it may have been
 * sent). No transactions, because D1 has none through Kysely.
 */

/** What an attempt came to, as the tenant may read it (no network details). */
export interface AttemptRecord {
  /** The HTTP status, or null when no response arrived (or nothing was sent). */
  statusCode: number | null;
  /** Null on 2xx; otherwise why, from a fixed set. */
  reason: WebhookAttemptReason | null;
  /** Null on 2xx; otherwise a short sentence. */
  error: string | null;
}

/**
 * Claims attempt `row.attempts + 1` of a pending delivery still due at `now` and unchanged
 * since `row` was read, leased until `leaseUntil`; false when another sender won it.
 */
export async function claimAttempt(
  db: Kysely<Database>,
  row: DueDelivery,
  now: number,
  leaseUntil: number,
): Promise<boolean> {
  const claim = await db
    .updateTable("webhook_deliveries")
    .set({ attempts: row.attempts + 1, next_attempt_at: leaseUntil, updated_at: now })
    .where("id", "=", row.id)
    .where("state", "=", "pending")
    .where("attempts", "=", row.attempts)
    .where("next_attempt_at", "<=", now)
    .executeTakeFirst();
  return claim.numUpdatedRows === 1n;
}

/**
 * Claims attempt `row.attempts + 1` from whatever state the delivery is in (a redelivery
 * the tenant asked for), back to pending and leased until `leaseUntil`; false when it
 * changed since `row` was read.
 */
export async function claimRedelivery(
  db: Kysely<Database>,
  row: DueDelivery & { state: string },
  now: number,
  leaseUntil: number,
): Promise<boolean> {
  const claim = await db
    .updateTable("webhook_deliveries")
    .set({
      state: "pending",
      attempts: row.attempts + 1,
      next_attempt_at: leaseUntil,
      updated_at: now,
    })
    .where("id", "=", row.id)
    .where("state", "=", row.state)
    .where("attempts", "=", row.attempts)
    .executeTakeFirst();
  return claim.numUpdatedRows === 1n;
}

/**
 * Gives up a pending delivery unchanged since `row` was read, without a new attempt (its
 * schedule is spent); false when another sender changed it first.
 */
export async function abandonDelivery(
  db: Kysely<Database>,
  row: DueDelivery,
  now: number,
): Promise<boolean> {
  const gaveUp = await db
    .updateTable("webhook_deliveries")
    .set({ state: "failed", next_attempt_at: null, updated_at: now })
    .where("id", "=", row.id)
    .where("state", "=", "pending")
    .where("attempts", "=", row.attempts)
    .executeTakeFirst();
  return gaveUp.numUpdatedRows === 1n;
}

export async function recordAttempt(
  db: Kysely<Database>,
  deliveryId: string,
  n: number,
  timing: { at: number; durationMs: number },
  result: AttemptRecord,
): Promise<void> {
  await db
    .insertInto("webhook_attempts")
    .values({
      delivery_id: deliveryId,
      n,
      at: timing.at,
      status_code: result.statusCode,
      reason: result.reason,
      error: result.error,
      duration_ms: Math.max(0, timing.durationMs),
    })
    .execute();
}

/**
 * The delivery's state after attempt `n`. Conditional on still owning attempt n, so a
 * sender whose lease ran out cannot overwrite the outcome of a newer attempt.
 */
export async function finishAttempt(
  db: Kysely<Database>,
  deliveryId: string,
  n: number,
  state: DeliveryState,
  nextAttemptAt: number | null,
  at: number,
): Promise<void> {
  await db
    .updateTable("webhook_deliveries")
    .set({ state, next_attempt_at: nextAttemptAt, updated_at: at })
    .where("id", "=", deliveryId)
    .where("state", "=", "pending")
    .where("attempts", "=", n)
    .execute();
}
