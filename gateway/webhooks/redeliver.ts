import type { WebhookStore } from "../store/webhook-store.ts";
import { type DeliverDeps, type DeliveryState, leaseUntil, makeClaimedAttempt } from "./attempt.ts";

/**
 * `POST /v1/jobs/{id}/webhooks/{delivery}/redeliver`: one more attempt, now, with the same
 * payload and `webhook-id` (receivers deduplicate on it) and a fresh timestamp and
 * signature. It goes out even if the endpoint was disabled (a success re-enables it).
 *
 * A delivery still being retried keeps its schedule: this is just its next attempt, early.
 * A finished one (delivered, failed, skipped) gets a single attempt whose failure is final;
 * the tenant can ask again.
 */
export type RedeliverResult =
  | { kind: "sent"; state: DeliveryState; attempt: number }
  | { kind: "not_found" }
  /** Another attempt at it started in the meantime. */
  | { kind: "busy" };

export async function redeliver(
  store: WebhookStore,
  target: { tenantId: string; jobId: string; deliveryId: string },
  deps: DeliverDeps,
): Promise<RedeliverResult> {
  const row = await store.deliveryForTenant(target);
  if (!row) return { kind: "not_found" };

  const now = deps.now();
  // The same conditional claim as an automatic attempt, from whatever state it was in.
  // A pending delivery's scheduled retry and a lease look alike, so this may overlap an
  // attempt already in flight: the receiver may then get the event twice (webhooks are
  // at-least-once; it deduplicates on webhook-id), and the older attempt cannot overwrite
  // the outcome, because its final update is conditional on its attempt number.
  if (!(await store.claimRedelivery(row, now, leaseUntil(now, deps)))) return { kind: "busy" };
  const n = row.attempts + 1;
  const state = await makeClaimedAttempt(store, row, n, deps, {
    manual: true,
    retryOnFailure: row.state === "pending",
  });
  return { kind: "sent", state, attempt: n };
}
