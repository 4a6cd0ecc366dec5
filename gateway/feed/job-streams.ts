import type { Gateway } from "../context.ts";
import { RetryLaterProblem } from "../limits/backpressure.ts";

/**
 * Open `GET /v1/jobs/{id}/events` streams per tenant on this gateway (on Workers, per
 * isolate), capped at `maxJobStreamsPerTenant`: each open one is a loop that re-reads its
 * job, so one tenant's client could otherwise hold as many as its request rate lets it
 * open. Keyed by the notifier, which every per-request copy of a gateway shares.
 */
const openByGateway = new WeakMap<object, Map<string, number>>();

/** Takes a place for one of the tenant's job streams; the returned function gives it back (once). */
export function holdJobStream(gateway: Gateway, tenantId: string): () => void {
  const open = openByGateway.get(gateway.notifier) ?? new Map<string, number>();
  openByGateway.set(gateway.notifier, open);
  const max = gateway.config.maxJobStreamsPerTenant;
  const held = open.get(tenantId) ?? 0;
  if (held >= max) {
    // The SDK waits out Retry-After and opens it again: a place frees as a job ends.
    throw new RetryLaterProblem(
      429,
      "too_many_streams",
      "Too many open job event streams",
      `At most ${max} job event streams per tenant; follow many jobs on one GET /v1/events stream instead.`,
      1,
    );
  }
  open.set(tenantId, held + 1);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    const left = (open.get(tenantId) ?? 1) - 1;
    if (left > 0) open.set(tenantId, left);
    else open.delete(tenantId);
  };
}
