import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { disabledEndpoint, recordEndpointFailure, recordEndpointSuccess } from "./endpoints.ts";
import { type PostResult, postWebhook } from "./post.ts";
import { delayAfterFailureMs, MAX_ATTEMPTS, parseRetryAfterMs } from "./schedule.ts";
import { signWebhook, type WebhookHeaders } from "./sign.ts";
import { checkWebhookUrl, type WebhookUrlPolicy } from "./url-policy.ts";

/**
 * One attempt at one delivery: claim it, check it may be sent, send it, record it.
 *
 * Claiming: `attempts` doubles as a version number. A sender claims the next attempt with a
 * conditional UPDATE (`attempts = seen` → `seen + 1`) that also pushes `next_attempt_at`
 * out by a lease; only one of two concurrent senders can win it, and the attempt number it
 * won keys the attempt row. If a sender dies mid-attempt, the lease runs out and the next
 * sweep tries again (that lost attempt still counts toward the schedule: it may have been
 * sent). No transactions, because D1 has none through Kysely.
 */

/** skipped: not sent because its endpoint was disabled. */
export type DeliveryState = "pending" | "delivered" | "failed" | "skipped";

export interface DeliverDeps {
  fetch: typeof fetch;
  /** Milliseconds since the epoch. */
  now: () => number;
  /** In [0, 1); jitter for the retry schedule. Defaults to Math.random. */
  random?: () => number;
  /**
   * The tenant's `whsec_…` signing secrets: the current one, or during a rotation's overlap
   * the current one and then the old one (each attempt then carries both signatures).
   */
  secretFor(tenantId: string): Promise<string | readonly string[]>;
  /** Per attempt, response body included. Default 15 000. */
  timeoutMs?: number;
  /** The most deliveries one `deliverDue` call sends. Default 50. */
  limit?: number;
  /**
   * Checked again before each attempt (the URL was checked at submission, but the policy
   * may have tightened since, and a row may predate it). Absent: not checked.
   */
  urlPolicy?: WebhookUrlPolicy;
  /** How long an endpoint may fail every attempt before it is disabled. Default 5 days. */
  disableAfterMs?: number;
}

export interface DueDelivery {
  id: string;
  tenant_id: string;
  url: string;
  payload: string;
  attempts: number;
}

/** "lost": another sender won the claim. "abandoned": given up without a new attempt. */
export type Outcome = DeliveryState | "lost" | "abandoned";

const DEFAULT_TIMEOUT_MS = 15_000;
/** Added to the timeout to form the claim's lease: room for signing and recording. */
const LEASE_MARGIN_MS = 60_000;

export function leaseUntil(now: number, deps: DeliverDeps): number {
  return now + (deps.timeoutMs ?? DEFAULT_TIMEOUT_MS) + LEASE_MARGIN_MS;
}

/** Claims the next scheduled attempt of a due, pending delivery and makes it. */
export async function claimAndSend(
  db: Kysely<Database>,
  row: DueDelivery,
  deps: DeliverDeps,
): Promise<Outcome> {
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
    return gaveUp.numUpdatedRows === 1n ? "abandoned" : "lost";
  }
  const n = row.attempts + 1;
  const claim = await db
    .updateTable("webhook_deliveries")
    .set({ attempts: n, next_attempt_at: leaseUntil(now, deps), updated_at: now })
    .where("id", "=", row.id)
    .where("state", "=", "pending")
    .where("attempts", "=", row.attempts)
    .where("next_attempt_at", "<=", now)
    .executeTakeFirst();
  if (claim.numUpdatedRows !== 1n) return "lost";
  return makeClaimedAttempt(db, row, n, deps, { manual: false, retryOnFailure: true });
}

/**
 * Makes attempt `n`, already claimed. A manual attempt (a redelivery the tenant asked for)
 * goes out even to a disabled endpoint. Without `retryOnFailure` a failure is final.
 */
export async function makeClaimedAttempt(
  db: Kysely<Database>,
  row: DueDelivery,
  n: number,
  deps: DeliverDeps,
  options: { manual: boolean; retryOnFailure: boolean },
): Promise<DeliveryState> {
  const startedAt = deps.now();
  const notSent = await reasonNotToSend(db, row, deps, options.manual);
  if (notSent) {
    await recordAttempt(
      db,
      row.id,
      n,
      { at: startedAt, durationMs: 0 },
      { statusCode: null, error: notSent.error },
    );
    await finish(db, row.id, n, notSent.state, null, startedAt);
    return notSent.state;
  }

  const result = await send(row, startedAt, deps);
  const finishedAt = deps.now();
  let state: DeliveryState = "delivered";
  let nextAttemptAt: number | null = null;
  if (result.error !== null) {
    const retryAfterMs = parseRetryAfterMs(result.retryAfter, finishedAt);
    const delay = !options.retryOnFailure
      ? null
      : delayAfterFailureMs(n, { statusCode: result.statusCode, retryAfterMs }, deps.random);
    state = delay === null ? "failed" : "pending";
    if (delay !== null) nextAttemptAt = finishedAt + delay;
  }
  await recordAttempt(db, row.id, n, { at: startedAt, durationMs: finishedAt - startedAt }, result);
  await finish(db, row.id, n, state, nextAttemptAt, finishedAt);
  if (result.error === null) {
    await recordEndpointSuccess(db, row.tenant_id, row.url, finishedAt);
  } else {
    const failure = { at: finishedAt, error: result.error };
    await recordEndpointFailure(db, row.tenant_id, row.url, failure, deps.disableAfterMs);
  }
  return state;
}

async function reasonNotToSend(
  db: Kysely<Database>,
  row: DueDelivery,
  deps: DeliverDeps,
  manual: boolean,
): Promise<{ state: DeliveryState; error: string } | null> {
  if (deps.urlPolicy) {
    const check = checkWebhookUrl(row.url, deps.urlPolicy);
    if (!check.ok) return { state: "failed", error: `not sent: the webhook URL ${check.reason}` };
  }
  if (manual) return null;
  const disabled = await disabledEndpoint(db, row.tenant_id, row.url);
  if (!disabled) return null;
  const since = new Date(disabled.disabledAt).toISOString();
  return {
    state: "skipped",
    error: `not sent: endpoint disabled since ${since}: ${disabled.reason}`.slice(0, 600),
  };
}

async function recordAttempt(
  db: Kysely<Database>,
  deliveryId: string,
  n: number,
  timing: { at: number; durationMs: number },
  result: PostResult,
): Promise<void> {
  await db
    .insertInto("webhook_attempts")
    .values({
      delivery_id: deliveryId,
      n,
      at: timing.at,
      status_code: result.statusCode,
      error: result.error,
      duration_ms: Math.max(0, timing.durationMs),
    })
    .execute();
}

/**
 * Conditional on still owning attempt n, so a sender whose lease ran out cannot overwrite
 * the outcome of a newer attempt.
 */
async function finish(
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

async function send(row: DueDelivery, at: number, deps: DeliverDeps): Promise<PostResult> {
  let headers: WebhookHeaders;
  try {
    headers = signWebhook(await deps.secretFor(row.tenant_id), row.id, at, row.payload);
  } catch (error) {
    // A bad or missing secret is recorded like any failed attempt, and retried.
    const reason = error instanceof Error ? error.message : String(error);
    return { statusCode: null, error: `no signing secret: ${reason}`.slice(0, 300) };
  }
  return postWebhook(
    deps.fetch,
    row.url,
    row.payload,
    headers,
    deps.timeoutMs ?? DEFAULT_TIMEOUT_MS,
  );
}
