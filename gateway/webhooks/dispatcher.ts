import type { WebhookStore } from "../store/webhook-store.ts";
import { claimAndSend, type DeliverDeps, type DueDelivery, type Outcome } from "./attempt.ts";

/**
 * Sends due webhook deliveries (first attempts the fast path missed, and every retry) apart
 * from the sweep, with a share of the slots per tenant.
 *
 * Each attempt may take the whole timeout (15 s) when an endpoint accepts the connection and
 * never answers. Sent from the sweep, 50 such deliveries held up expiry, stale-job reclaim
 * and retention, on every sweep, for every tenant. Here, `tick()` only starts deliveries in
 * the free slots and returns; each slot is given back when its attempt ends. A tenant's
 * deliveries hold at most `perTenant` slots: past that, `tick()` leaves the tenant out of its
 * query, so the deliveries of the others behind its backlog are found and sent, whatever its
 * endpoints do. Safe beside other gateways' dispatchers: each attempt is claimed first
 * (attempt.ts, store/webhook-attempts.ts), and a lost claim sends nothing.
 */
export interface DispatchOptions {
  /** Deliveries in flight at once, every tenant together. Default 50. */
  concurrency?: number;
  /** The most slots one tenant's deliveries hold at once. Default a fifth of `concurrency`. */
  perTenant?: number;
  /** An attempt that threw (its store failed): it is retried once its claim's lease ends. */
  onError?(error: unknown, delivery: DueDelivery): void;
  /** An attempt that ended. */
  onSent?(delivery: DueDelivery, outcome: Outcome): void;
}

export interface WebhookDispatcher {
  /**
   * Starts due deliveries in the free slots; resolves with how many once they are started,
   * never waiting for an attempt. One tick at a time: a call during another joins it.
   */
  tick(): Promise<number>;
  /** Resolves once every attempt started so far has ended. */
  drain(): Promise<void>;
  /** Attempts in flight now, by tenant. */
  inFlight(): ReadonlyMap<string, number>;
}

export const DEFAULT_DISPATCH_CONCURRENCY = 50;

export function createWebhookDispatcher(
  store: () => WebhookStore,
  deps: () => DeliverDeps,
  options: DispatchOptions = {},
): WebhookDispatcher {
  const concurrency = Math.max(1, options.concurrency ?? DEFAULT_DISPATCH_CONCURRENCY);
  const perTenant = Math.max(
    1,
    Math.min(concurrency, options.perTenant ?? Math.floor(concurrency / 5)),
  );
  const byTenant = new Map<string, number>();
  /** Ids being sent: a delivery not yet claimed is still due, and must not start twice. */
  const sending = new Set<string>();
  const attempts = new Set<Promise<void>>();
  let ticking: Promise<number> | null = null;

  const start = (delivery: DueDelivery, sendDeps: DeliverDeps) => {
    const tenant = delivery.tenant_id;
    sending.add(delivery.id);
    byTenant.set(tenant, (byTenant.get(tenant) ?? 0) + 1);
    const attempt = Promise.resolve()
      .then(() => claimAndSend(store(), delivery, sendDeps))
      .then(
        (outcome) => options.onSent?.(delivery, outcome),
        (error: unknown) => options.onError?.(error, delivery),
      )
      .finally(() => {
        sending.delete(delivery.id);
        const left = (byTenant.get(tenant) ?? 1) - 1;
        if (left > 0) byTenant.set(tenant, left);
        else byTenant.delete(tenant);
        attempts.delete(attempt);
      });
    attempts.add(attempt);
  };

  const fill = async (): Promise<number> => {
    const sendDeps = deps();
    let started = 0;
    for (;;) {
      const free = concurrency - sending.size;
      if (free <= 0) break;
      const full = [...byTenant].filter(([, n]) => n >= perTenant).map(([tenant]) => tenant);
      const due = await store().due(sendDeps.now(), free, full);
      let took = 0;
      for (const delivery of due) {
        if (sending.size >= concurrency) break;
        if (sending.has(delivery.id)) continue;
        if ((byTenant.get(delivery.tenant_id) ?? 0) >= perTenant) continue;
        start(delivery, sendDeps);
        took++;
      }
      started += took;
      // Nothing more is due, or nothing of it could start: the next tick looks again. A
      // tenant that reached its share in this batch is left out of the next query.
      if (took === 0 || due.length < free) break;
    }
    return started;
  };

  return {
    tick() {
      ticking ??= fill().finally(() => {
        ticking = null;
      });
      return ticking;
    },
    async drain() {
      while (attempts.size > 0) await Promise.allSettled([...attempts]);
    },
    inFlight: () => byTenant,
  };
}
