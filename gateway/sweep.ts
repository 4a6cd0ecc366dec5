import type { Gateway } from "./context.ts";
import { afterTransition, publishJob, webhookDeps } from "./jobs/lifecycle.ts";
import { deliverDue } from "./webhooks/deliveries.ts";

/** A job unpublished this long after its commit is taken to have lost its publish. */
const OUTBOX_GRACE_MS = 10_000;
const BATCH = 100;

export interface SweepReport {
  republished: number;
  expired: number;
  webhooks: number;
}

/**
 * The periodic housekeeping, runtime-free: run on an interval on Node and from a cron
 * trigger on Workers. Each pass is bounded and safe to run on several gateways at once.
 */
export async function sweep(gateway: Gateway): Promise<SweepReport> {
  const now = gateway.now();
  let republished = 0;
  for (const row of await gateway.jobs.unpublished(now - OUTBOX_GRACE_MS, BATCH)) {
    if (await publishJob(gateway, row)) republished++;
  }
  let expired = 0;
  for (const row of await gateway.jobs.overdueQueued(now, BATCH)) {
    const result = await gateway.jobs.expire(row.id, now);
    if (result.ok) {
      expired++;
      afterTransition(gateway, result.job);
    }
  }
  const webhooks = await deliverDue(gateway.db, webhookDeps(gateway));
  return { republished, expired, webhooks: webhooks.attempted };
}
