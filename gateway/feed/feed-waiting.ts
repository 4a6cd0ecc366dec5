import type { Gateway } from "../context.ts";
import { modelJobCounts } from "../jobs/model-state.ts";
import { sharedReadings } from "../jobs/shared-readings.ts";
import { type Waiting, waitingOf } from "../jobs/waiting.ts";
import type { TenantEventRow } from "../store/tenant-events.ts";

/**
 * Why a job that just went `queued` waits, for `GET /v1/events` (issue 26 #3). The tenant's
 * feed carries every change of every job, so a flood of submits is a flood of queued events:
 * each must cost nothing of the store. The reason is judged per tenant and model, once per
 * period for every stream (shared-readings.ts), from the readings the model's state shares;
 * the jobs behind others are counted as the model's queue, not placed in it (its
 * `queue_position` is on `GET /v1/jobs/{id}`). A retry's backoff is the event's own.
 */
const byTenantModel = sharedReadings<Waiting>({
  periodMs: (gateway) => gateway.config.queueDepthCacheMs,
});

export async function feedWaiting(
  gateway: Gateway,
  tenantId: string,
  row: TenantEventRow,
): Promise<Waiting> {
  const subject = {
    model: row.model,
    tenant_id: tenantId,
    attempt: row.attempt,
    error: row.error,
    // The event's own time: a retry's backoff counts from it.
    updated_at: row.at,
    // Anything else goes `queued` held (a submit, a user's retry): the tenant's limit applies.
    released_at: null,
  };
  // An attempt that failed and will be retried stays released, its message waiting out its
  // backoff in the queue (JobStore.fail): delayed.
  if (row.attempt > 0 && row.error !== null) {
    return waitingOf(gateway, { ...subject, released_at: row.at }, 0);
  }
  return byTenantModel.get(gateway, `${tenantId}\n${row.model}`, async () => {
    const { queued } = await modelJobCounts(gateway, row.model);
    const others = Math.max(0, queued - 1);
    const waiting = await waitingOf(gateway, { ...subject, error: null }, others);
    if (waiting.waiting_reason !== "behind_jobs") return waiting;
    return {
      waiting_reason: "behind_jobs",
      waiting_detail: `${others} other job${others === 1 ? " is" : "s are"} queued for model ${row.model}; GET /v1/jobs/{id} gives its queue_position.`,
    };
  });
}
