import type { WebhookStore } from "../store/webhook-store.ts";
import { type DeliverDeps, deliverOne } from "./deliveries.ts";

/**
 * A tenant's first attempts sent at once per gateway, and all tenants' together. Each may
 * hold a connection for the attempt's whole timeout (15 s) when a receiver takes the request
 * and never answers: unbounded, one tenant's burst (a batch of 1 000 jobs to a slow
 * receiver) held a connection per job while other tenants' webhooks waited behind them.
 * The same share as the dispatcher's (dispatcher.ts: 50 slots, a fifth per tenant).
 */
export const FIRST_ATTEMPTS_PER_TENANT = 10;
export const FIRST_ATTEMPTS_PER_GATEWAY = 50;

interface Sending {
  all: number;
  byTenant: Map<string, number>;
}
const sendingOf = new WeakMap<object, Sending>();

/**
 * Sends a delivery just recorded, right after the change that made it (so its receiver does
 * not wait for the dispatcher's next tick), unless `owner` (the gateway) already sends its
 * share of first attempts: the delivery then stays recorded and due, and the dispatcher
 * sends it within its own per-tenant share of slots.
 */
export async function sendFirstAttempt(
  owner: object,
  tenantId: string,
  store: WebhookStore,
  deliveryId: string,
  deps: DeliverDeps,
): Promise<void> {
  let sending = sendingOf.get(owner);
  if (!sending) {
    sending = { all: 0, byTenant: new Map() };
    sendingOf.set(owner, sending);
  }
  const mine = sending.byTenant.get(tenantId) ?? 0;
  if (mine >= FIRST_ATTEMPTS_PER_TENANT || sending.all >= FIRST_ATTEMPTS_PER_GATEWAY) return;
  sending.all++;
  sending.byTenant.set(tenantId, mine + 1);
  try {
    await deliverOne(store, deliveryId, deps);
  } finally {
    sending.all--;
    const left = (sending.byTenant.get(tenantId) ?? 1) - 1;
    if (left > 0) sending.byTenant.set(tenantId, left);
    else sending.byTenant.delete(tenantId);
  }
}
