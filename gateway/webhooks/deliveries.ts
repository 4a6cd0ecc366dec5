import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { newId } from "../../shared/ids.ts";
import type { WebhookEventType } from "../../shared/protocol/job.ts";
import type { WebhookPayload } from "../../shared/protocol/webhook.ts";
import { type PostResult, postWebhook } from "./post.ts";
import { MAX_ATTEMPTS, nextAttemptDelayMs } from "./schedule.ts";
import { signWebhook } from "./sign.ts";

export { listDeliveries, type WebhookAttemptView, type WebhookDeliveryView } from "./history.ts";

/**
 * Webhook deliveries: one row per event to send, one `webhook_attempts` row per try.
 * Runtime-free: `fetch` and the clock are injected, so this runs on Node and in workerd.
 *
 * Claiming: `attempts` doubles as a version number. A sender claims the next attempt with a
 * conditional UPDATE (`attempts = seen` → `seen + 1`) that also pushes `next_attempt_at`
 * out by a lease; only one of two concurrent senders can win it, and the attempt number it
 * won keys the attempt row. If a sender dies mid-attempt, the lease runs out and the next
 * sweep tries again (that lost attempt still counts toward the schedule: it may have been
 * sent). No transactions, because D1 has none through Kysely.
 */

export type DeliveryState = "pending" | "delivered" | "failed";

export interface EnqueueWebhookInput {
  tenantId: string;
  jobId: string;
  eventType: WebhookEventType;
  url: string;
  payload: WebhookPayload;
}

export interface DeliverDeps {
  fetch: typeof fetch;
  /** Milliseconds since the epoch. */
  now: () => number;
  /** In [0, 1); jitter for the retry schedule. Defaults to Math.random. */
  random?: () => number;
  /** The tenant's `whsec_…` signing secret. */
  secretFor(tenantId: string): Promise<string>;
  /** Per attempt, response body included. Default 15 000. */
  timeoutMs?: number;
  /** The most deliveries one `deliverDue` call sends. Default 50. */
  limit?: number;
}

/**
 * What one pass did: attempts made, and how the deliveries ended up (accepted, given up,
 * or scheduled for another try).
 */
export interface DeliverySummary {
  attempted: number;
  delivered: number;
  failed: number;
  retrying: number;
}

const DEFAULT_TIMEOUT_MS = 15_000;
const DEFAULT_LIMIT = 50;
/** Added to the timeout to form the claim's lease: room for signing and recording. */
const LEASE_MARGIN_MS = 60_000;

/** Records an event to deliver; the first attempt is due at once. Returns the delivery id. */
export async function enqueueWebhook(
  db: Kysely<Database>,
  input: EnqueueWebhookInput,
  now: number,
): Promise<string> {
  const id = newId("whd", now);
  await db
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
    })
    .execute();
  return id;
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

/** Looks up signing secrets in the `tenants` table, for `DeliverDeps.secretFor`. */
export function secretFromTenants(db: Kysely<Database>): (tenantId: string) => Promise<string> {
  return async (tenantId) => {
    const tenant = await db
      .selectFrom("tenants")
      .select("webhook_secret")
      .where("id", "=", tenantId)
      .executeTakeFirst();
    if (!tenant) throw new Error(`unknown tenant ${tenantId}`);
    return tenant.webhook_secret;
  };
}

function dueDeliveries(db: Kysely<Database>, now: number) {
  return db
    .selectFrom("webhook_deliveries")
    .select(["id", "tenant_id", "url", "payload", "attempts"])
    .where("state", "=", "pending")
    .where("next_attempt_at", "<=", now);
}

interface DueDelivery {
  id: string;
  tenant_id: string;
  url: string;
  payload: string;
  attempts: number;
}

/** "skipped": another sender won the claim. "abandoned": given up without a new attempt. */
type Outcome = DeliveryState | "skipped" | "abandoned";

async function claimAndSend(
  db: Kysely<Database>,
  row: DueDelivery,
  deps: DeliverDeps,
): Promise<Outcome> {
  const timeoutMs = deps.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const now = deps.now();
  // A sender died during the last allowed attempt: the schedule is spent, do not send a 9th.
  if (row.attempts >= MAX_ATTEMPTS) {
    const gaveUp = await db
      .updateTable("webhook_deliveries")
      .set({ state: "failed", next_attempt_at: null, updated_at: now })
      .where("id", "=", row.id)
      .where("state", "=", "pending")
      .where("attempts", "=", row.attempts)
      .executeTakeFirst();
    return gaveUp.numUpdatedRows === 1n ? "abandoned" : "skipped";
  }
  const n = row.attempts + 1;
  const claim = await db
    .updateTable("webhook_deliveries")
    .set({ attempts: n, next_attempt_at: now + timeoutMs + LEASE_MARGIN_MS, updated_at: now })
    .where("id", "=", row.id)
    .where("state", "=", "pending")
    .where("attempts", "=", row.attempts)
    .where("next_attempt_at", "<=", now)
    .executeTakeFirst();
  if (claim.numUpdatedRows !== 1n) return "skipped";

  const startedAt = deps.now();
  const result = await send(row, startedAt, timeoutMs, deps);
  const finishedAt = deps.now();

  let state: DeliveryState;
  let nextAttemptAt: number | null = null;
  if (result.error === null) {
    state = "delivered";
  } else if (result.statusCode === 410) {
    // 410 Gone: the receiver says the endpoint is retired; retrying would only annoy it.
    state = "failed";
  } else {
    const delay = nextAttemptDelayMs(n, deps.random);
    state = delay === null ? "failed" : "pending";
    if (delay !== null) nextAttemptAt = finishedAt + delay;
  }

  await db
    .insertInto("webhook_attempts")
    .values({
      delivery_id: row.id,
      n,
      at: startedAt,
      status_code: result.statusCode,
      error: result.error,
      duration_ms: Math.max(0, finishedAt - startedAt),
    })
    .execute();
  // Conditional on still owning attempt n, so a sender whose lease ran out cannot overwrite
  // the outcome of a newer attempt.
  await db
    .updateTable("webhook_deliveries")
    .set({ state, next_attempt_at: nextAttemptAt, updated_at: finishedAt })
    .where("id", "=", row.id)
    .where("state", "=", "pending")
    .where("attempts", "=", n)
    .execute();
  return state;
}

async function send(
  row: DueDelivery,
  at: number,
  timeoutMs: number,
  deps: DeliverDeps,
): Promise<PostResult> {
  let secret: string;
  try {
    secret = await deps.secretFor(row.tenant_id);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { statusCode: null, error: `no signing secret: ${reason}`.slice(0, 300) };
  }
  const headers = signWebhook(secret, row.id, at, row.payload);
  return postWebhook(deps.fetch, row.url, row.payload, headers, timeoutMs);
}

function summarize(outcomes: Outcome[]): DeliverySummary {
  const summary: DeliverySummary = { attempted: 0, delivered: 0, failed: 0, retrying: 0 };
  for (const outcome of outcomes) {
    if (outcome === "skipped") continue;
    if (outcome === "abandoned") {
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
