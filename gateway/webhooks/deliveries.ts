import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { newId } from "../../shared/ids.ts";
import type { BatchWebhookPayload } from "../../shared/protocol/batch.ts";
import type { WebhookEventType } from "../../shared/protocol/job.ts";
import type { WebhookPayload } from "../../shared/protocol/webhook.ts";
import { claimAndSend, type DeliverDeps, type Outcome } from "./attempt.ts";
import { signingSecrets } from "./secret-rotation.ts";

export type { DeliverDeps, DeliveryState } from "./attempt.ts";
export { listDeliveries, type WebhookAttemptView, type WebhookDeliveryView } from "./history.ts";

/**
 * Webhook deliveries: one row per event to send, one `webhook_attempts` row per try
 * (attempt.ts makes them). Runtime-free: `fetch` and the clock are injected, so this runs
 * on Node and in workerd.
 */

export interface EnqueueWebhookInput {
  tenantId: string;
  jobId: string;
  eventType: WebhookEventType | BatchWebhookPayload["type"];
  url: string;
  payload: WebhookPayload | BatchWebhookPayload;
  /**
   * The job event it is for: one delivery per event, whichever of the gateway's fast path
   * and the sweeper's outbox pass records it first (migration 0011).
   */
  eventSeq?: number;
}

/**
 * What one pass did: attempts made, and how the deliveries ended up (accepted, given up,
 * or scheduled for another try). A delivery skipped because its endpoint is disabled
 * counts as failed, not attempted.
 */
export interface DeliverySummary {
  attempted: number;
  delivered: number;
  failed: number;
  retrying: number;
}

const DEFAULT_LIMIT = 50;

/**
 * Records an event to deliver; the first attempt is due at once. Returns the delivery id:
 * for an event that already has its delivery (`eventSeq`), that one's, and nothing new.
 */
export async function enqueueWebhook(
  db: Kysely<Database>,
  input: EnqueueWebhookInput,
  now: number,
): Promise<string> {
  const id = newId("whd", now);
  const inserted = await db
    .insertInto("webhook_deliveries")
    .values({
      id,
      tenant_id: input.tenantId,
      job_id: input.jobId,
      event_type: input.eventType,
      url: input.url,
      // Stored as sent: the signature covers these exact bytes on every retry.
      payload: JSON.stringify(input.payload),
      state: "pending",
      attempts: 0,
      next_attempt_at: now,
      created_at: now,
      updated_at: now,
      ...(input.eventSeq === undefined ? {} : { event_seq: input.eventSeq }),
    })
    .onConflict((oc) => oc.columns(["job_id", "event_seq"]).doNothing())
    .executeTakeFirst();
  if (input.eventSeq === undefined || Number(inserted.numInsertedOrUpdatedRows ?? 1n) > 0) {
    return id;
  }
  const existing = await db
    .selectFrom("webhook_deliveries")
    .select("id")
    .where("job_id", "=", input.jobId)
    .where("event_seq", "=", input.eventSeq)
    .executeTakeFirstOrThrow();
  return existing.id;
}

/** Sends every pending delivery that is due (up to `limit`), concurrently. */
export async function deliverDue(
  db: Kysely<Database>,
  deps: DeliverDeps,
): Promise<DeliverySummary> {
  const rows = await dueDeliveries(db, deps.now())
    .orderBy("next_attempt_at")
    .limit(deps.limit ?? DEFAULT_LIMIT)
    .execute();
  const outcomes = await Promise.all(rows.map((row) => claimAndSend(db, row, deps)));
  return summarize(outcomes);
}

/**
 * Sends one delivery now if it is pending and due: the path right after a state change,
 * so the receiver does not wait for the next sweep. Same claim as `deliverDue`, so a sweep
 * running at the same moment cannot send it twice.
 */
export async function deliverOne(
  db: Kysely<Database>,
  deliveryId: string,
  deps: DeliverDeps,
): Promise<DeliverySummary> {
  const row = await dueDeliveries(db, deps.now()).where("id", "=", deliveryId).executeTakeFirst();
  return summarize(row ? [await claimAndSend(db, row, deps)] : []);
}

/**
 * Looks up signing secrets, for `DeliverDeps.secretFor`: the tenant's current secret, and
 * during a rotation's overlap the previous one too.
 */
export function secretFromTenants(
  db: Kysely<Database>,
  now: () => number = Date.now,
): (tenantId: string) => Promise<string[]> {
  return (tenantId) => signingSecrets(db, tenantId, now());
}

function dueDeliveries(db: Kysely<Database>, now: number) {
  return db
    .selectFrom("webhook_deliveries")
    .select(["id", "tenant_id", "url", "payload", "attempts"])
    .where("state", "=", "pending")
    .where("next_attempt_at", "<=", now);
}

function summarize(outcomes: Outcome[]): DeliverySummary {
  const summary: DeliverySummary = { attempted: 0, delivered: 0, failed: 0, retrying: 0 };
  for (const outcome of outcomes) {
    if (outcome === "lost") continue;
    if (outcome === "abandoned" || outcome === "skipped") {
      summary.failed++;
      continue;
    }
    summary.attempted++;
    if (outcome === "delivered") summary.delivered++;
    else if (outcome === "failed") summary.failed++;
    else summary.retrying++;
  }
  return summary;
}
