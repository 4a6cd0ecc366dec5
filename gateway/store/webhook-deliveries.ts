import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { newId } from "../../shared/ids.ts";
import type { BatchWebhookPayload } from "../../shared/protocol/batch.ts";
import type { UsageThresholdPayload } from "../../shared/protocol/usage.ts";
import type { WebhookPayload } from "../../shared/protocol/webhook.ts";
import type { WebhookEventType } from "../../shared/protocol/webhook-subscription.ts";
import { isPostgresDb } from "./job-metadata.ts";

/**
 * Webhook deliveries: one row per event to send, one `webhook_attempts` row per try
 * (webhook-attempts.ts records them). Sending is gateway/webhooks/'s: these only read and
 * write the rows.
 */

/** skipped: not sent because its endpoint was disabled. */
export type DeliveryState = "pending" | "delivered" | "failed" | "skipped";

/** A pending delivery, as a sender needs it. */
export interface DueDelivery {
  id: string;
  tenant_id: string;
  /** The job it is about (for a batch or usage delivery, the key it was recorded under). */
  job_id: string;
  url: string;
  payload: string;
  attempts: number;
}

export interface EnqueueWebhookInput {
  tenantId: string;
  jobId: string;
  eventType: WebhookEventType | BatchWebhookPayload["type"] | UsageThresholdPayload["type"];
  url: string;
  payload: WebhookPayload | BatchWebhookPayload | UsageThresholdPayload;
  /**
   * The job event it is for: one delivery per event, whichever of the gateway's fast path
   * and the sweeper's outbox pass records it first (migration 0011).
   */
  eventSeq?: number;
}

/**
 * Records an event to deliver; the first attempt is due at once. Returns the delivery id:
 * for an event that already has its delivery (`eventSeq`), that one's, and nothing new.
 */
/** Columns of a delivery `enqueueWebhooks` writes, in the order of its JSON rows. */
const ENQUEUED = [
  "id",
  "tenant_id",
  "job_id",
  "event_type",
  "url",
  "payload",
  "event_seq",
] as const;

/**
 * Pending deliveries of many job events (a purge's, a batch cancel's) in one INSERT whatever
 * their number: the rows one bound JSON array, since D1 binds 100 parameters a statement and
 * a Worker invocation may make 1 000 D1 queries (https://developers.cloudflare.com/d1/platform/limits/).
 * An event that has its delivery already keeps it, as with `enqueueWebhook`.
 */
export async function enqueueWebhooks(
  db: Kysely<Database>,
  inputs: readonly (EnqueueWebhookInput & { eventSeq: number })[],
  now: number,
): Promise<void> {
  if (inputs.length === 0) return;
  const rows = JSON.stringify(
    inputs.map((input) => [
      newId("whd", now),
      input.tenantId,
      input.jobId,
      input.eventType,
      input.url,
      JSON.stringify(input.payload),
      input.eventSeq,
    ]),
  );
  const postgres = isPostgresDb(db);
  const column = (i: number) =>
    postgres
      ? sql.raw(i === 6 ? `(e->>${i})::bigint` : `e->>${i}`)
      : sql.raw(`json_extract(e.value, '$[${i}]')`);
  const from = postgres
    ? sql`json_array_elements(${rows}::json) AS e`
    : sql`json_each(${rows}) AS e`;
  await sql`INSERT INTO webhook_deliveries
      (${sql.raw(ENQUEUED.join(", "))}, state, attempts, next_attempt_at, created_at, updated_at)
    SELECT ${sql.join(ENQUEUED.map((_, i) => column(i)))}, 'pending', 0, ${now}, ${now}, ${now}
    FROM ${from} WHERE true
    ON CONFLICT (job_id, event_seq) DO NOTHING`.execute(db);
}

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

/**
 * Pending deliveries due at `now`, the longest due first, up to `limit`, of no tenant in
 * `skipTenants` (a dispatcher leaves out the tenants using their whole share of its slots,
 * so the rows behind theirs come up). A delivery being sent is not due: its claim moved
 * `next_attempt_at` past the attempt's timeout. Keep `skipTenants` well under D1's 100
 * bound parameters.
 */
export function dueDeliveries(
  db: Kysely<Database>,
  now: number,
  limit: number,
  skipTenants: readonly string[] = [],
): Promise<DueDelivery[]> {
  let query = dueQuery(db, now);
  if (skipTenants.length > 0) query = query.where("tenant_id", "not in", skipTenants);
  return query.orderBy("next_attempt_at").limit(limit).execute();
}

/** This delivery if it is pending and due at `now`. */
export function dueDelivery(
  db: Kysely<Database>,
  deliveryId: string,
  now: number,
): Promise<DueDelivery | undefined> {
  return dueQuery(db, now).where("id", "=", deliveryId).executeTakeFirst();
}

/**
 * A tenant's delivery of one of its jobs, whatever its state (a redelivery); undefined for
 * another tenant's.
 */
export function deliveryForTenant(
  db: Kysely<Database>,
  target: { tenantId: string; jobId: string; deliveryId: string },
): Promise<(DueDelivery & { state: string }) | undefined> {
  return (
    db
      .selectFrom("webhook_deliveries")
      .select(["id", "tenant_id", "job_id", "url", "payload", "attempts", "state"])
      .where("id", "=", target.deliveryId)
      // Both conditions keep one tenant from redelivering another's events by guessing ids.
      .where("tenant_id", "=", target.tenantId)
      .where("job_id", "=", target.jobId)
      .executeTakeFirst()
  );
}

function dueQuery(db: Kysely<Database>, now: number) {
  return db
    .selectFrom("webhook_deliveries")
    .select(["id", "tenant_id", "job_id", "url", "payload", "attempts"])
    .where("state", "=", "pending")
    .where("next_attempt_at", "<=", now);
}
