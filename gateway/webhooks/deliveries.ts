import type { WebhookStore } from "../store/webhook-store.ts";
import { claimAndSend, type DeliverDeps, type Outcome } from "./attempt.ts";

export type { DeliverDeps, DeliveryState, DueDelivery, Outcome } from "./attempt.ts";

/**
 * Sending the deliveries the store holds (store/webhook-deliveries.ts): each one claimed,
 * signed, posted and recorded by attempt.ts. Runtime-free: `fetch` and the clock are
 * injected, so this runs on Node and in workerd.
 */

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
 * Sends every pending delivery that is due (up to `limit`), concurrently, and waits for
 * them all. The gateways send through dispatcher.ts instead, which waits for none and gives
 * each tenant a share of its slots; this is the one-shot form, for tests and tools.
 */
export async function deliverDue(store: WebhookStore, deps: DeliverDeps): Promise<DeliverySummary> {
  const rows = await store.due(deps.now(), deps.limit ?? DEFAULT_LIMIT);
  const outcomes = await Promise.all(rows.map((row) => claimAndSend(store, row, deps)));
  return summarize(outcomes);
}

/**
 * Sends one delivery now if it is pending and due: the path right after a state change,
 * so the receiver does not wait for the next sweep. Same claim as `deliverDue`, so a sweep
 * running at the same moment cannot send it twice.
 */
export async function deliverOne(
  store: WebhookStore,
  deliveryId: string,
  deps: DeliverDeps,
): Promise<DeliverySummary> {
  const row = await store.dueOne(deliveryId, deps.now());
  return summarize(row ? [await claimAndSend(store, row, deps)] : []);
}

/**
 * Looks up signing secrets, for `DeliverDeps.secretFor`: the tenant's current secret, and
 * during a rotation's overlap the previous one too.
 */
export function secretFromTenants(
  store: Pick<WebhookStore, "signingSecrets">,
  now: () => number = Date.now,
): (tenantId: string) => Promise<string[]> {
  return (tenantId) => store.signingSecrets(tenantId, now());
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
