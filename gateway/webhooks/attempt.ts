import type { WebhookAttemptReason } from "../../shared/protocol/webhook-api.ts";
import type { DeliveryState, DueDelivery } from "../store/webhook-deliveries.ts";
import type { WebhookStore } from "../store/webhook-store.ts";
import { type PostResult, postWebhook } from "./post.ts";
import { delayAfterFailureMs, MAX_ATTEMPTS, parseRetryAfterMs } from "./schedule.ts";
import { signWebhook, type WebhookHeaders } from "./sign.ts";
import { attemptSpan, endAttemptSpan, hostOf, type WebhookTrace } from "./trace.ts";
import { checkWebhookUrl, type WebhookUrlPolicy } from "./url-policy.ts";

/**
 * One attempt at one delivery: claim it, check it may be sent, send it, record it. The
 * claim and the records are the store's (store/webhook-attempts.ts, where the claiming is
 * explained); the signing and the sending are here. Runtime-free: `fetch` and the clock
 * are injected, so this runs on Node and in workerd.
 */

export type { DeliveryState, DueDelivery } from "../store/webhook-deliveries.ts";

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
  /**
   * The gateway's log: how an attempt's connection failed goes here, and only here (the
   * attempt records a reason from a fixed set). Absent: not logged.
   */
  log?: { warn(fields: object, message: string): void };
  /** Each attempt as a span in its job's trace (webhooks/trace.ts); absent, none. */
  trace?: WebhookTrace;
  /**
   * Aborted when the gateway begins a graceful shutdown (Node): no attempt starts after it,
   * and one still waiting for its receiver is cut short and recorded as a `timeout`, its
   * retry kept on schedule for the next gateway, rather than holding the shutdown for the
   * attempt's whole timeout.
   */
  stopping?: AbortSignal;
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
  store: WebhookStore,
  row: DueDelivery,
  deps: DeliverDeps,
): Promise<Outcome> {
  // Shutting down: the delivery stays due, for the next gateway (or this one restarted).
  if (deps.stopping?.aborted) return "lost";
  const now = deps.now();
  // A sender died during the last allowed attempt: the schedule is spent, do not send a 9th.
  if (row.attempts >= MAX_ATTEMPTS) {
    return (await store.abandon(row, now)) ? "abandoned" : "lost";
  }
  if (!(await store.claim(row, now, leaseUntil(now, deps)))) return "lost";
  return makeClaimedAttempt(store, row, row.attempts + 1, deps, {
    manual: false,
    retryOnFailure: true,
  });
}

/**
 * Makes attempt `n`, already claimed. A manual attempt (a redelivery the tenant asked for)
 * goes out even to a disabled endpoint. Without `retryOnFailure` a failure is final.
 */
export async function makeClaimedAttempt(
  store: WebhookStore,
  row: DueDelivery,
  n: number,
  deps: DeliverDeps,
  options: { manual: boolean; retryOnFailure: boolean },
): Promise<DeliveryState> {
  const startedAt = deps.now();
  const notSent = await reasonNotToSend(store, row, deps, options.manual);
  if (notSent) {
    await store.recordAttempt(
      row.id,
      n,
      { at: startedAt, durationMs: 0 },
      { statusCode: null, reason: notSent.reason, error: notSent.error },
    );
    await store.finishAttempt(row.id, n, notSent.state, null, startedAt);
    return notSent.state;
  }

  const span = await attemptSpan(row, n, deps.trace);
  const result = await send(row, startedAt, deps);
  const finishedAt = deps.now();
  endAttemptSpan(span, result);
  if (result.detail) {
    deps.log?.warn(
      {
        delivery_id: row.id,
        tenant_id: row.tenant_id,
        attempt: n,
        host: hostOf(row.url),
        reason: result.reason,
        err: result.detail,
      },
      "webhook attempt failed",
    );
  }
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
  const timing = { at: startedAt, durationMs: finishedAt - startedAt };
  await store.recordAttempt(row.id, n, timing, result);
  await store.finishAttempt(row.id, n, state, nextAttemptAt, finishedAt);
  if (result.error === null) {
    await store.recordEndpointSuccess(row.tenant_id, row.url, finishedAt);
  } else {
    const failure = { at: finishedAt, error: result.error };
    await store.recordEndpointFailure(row.tenant_id, row.url, failure, deps.disableAfterMs);
  }
  return state;
}

async function reasonNotToSend(
  store: WebhookStore,
  row: DueDelivery,
  deps: DeliverDeps,
  manual: boolean,
): Promise<{ state: DeliveryState; reason: WebhookAttemptReason; error: string } | null> {
  if (deps.urlPolicy) {
    const check = checkWebhookUrl(row.url, deps.urlPolicy);
    if (!check.ok) {
      // The check reads the URL alone (what the tenant wrote), never DNS: safe to show.
      return {
        state: "failed",
        reason: "refused_by_policy",
        error: `not sent: the webhook URL ${check.reason}`,
      };
    }
  }
  if (manual) return null;
  const disabled = await store.disabledEndpoint(row.tenant_id, row.url);
  if (!disabled) return null;
  const since = new Date(disabled.disabledAt).toISOString();
  return {
    state: "skipped",
    reason: "endpoint_disabled",
    error: `not sent: endpoint disabled since ${since}: ${disabled.reason}`.slice(0, 600),
  };
}

async function send(row: DueDelivery, at: number, deps: DeliverDeps): Promise<PostResult> {
  let headers: WebhookHeaders;
  try {
    headers = signWebhook(await deps.secretFor(row.tenant_id), row.id, at, row.payload);
  } catch (error) {
    // A bad or missing secret is recorded like any failed attempt, and retried.
    const reason = error instanceof Error ? error.message : String(error);
    return {
      statusCode: null,
      reason: "no_signing_secret",
      error: `no signing secret: ${reason}`.slice(0, 300),
    };
  }
  return postWebhook(deps.fetch, row.url, row.payload, headers, {
    timeoutMs: deps.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    ...(deps.stopping ? { stopping: deps.stopping } : {}),
  });
}
