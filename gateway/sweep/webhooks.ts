import type { Gateway } from "../context.ts";
import { subscribedWebhook } from "../jobs/lifecycle.ts";
import { toJob } from "../store/job-rows.ts";

/**
 * The webhook outbox's pass: every subscribed `running` or terminal change gets its
 * delivery, even when the gateway that made the change died before recording it. Entries
 * older than `graceMs` (the fast path had its chance) that have no delivery get one, built
 * from the job as that change left it; then the entries are forgotten. Safe on several
 * gateways at once: a delivery is unique per job event, so a second insert changes nothing.
 */
export async function recordLostWebhooks(
  gateway: Gateway,
  now: number,
  graceMs: number,
  batch: number,
): Promise<number> {
  const webhooks = gateway.stores.webhooks;
  const entries = await webhooks.outboxDue(now - graceMs, batch);
  let recorded = 0;
  for (const entry of entries) {
    if (entry.recorded) continue;
    const row = await gateway.stores.jobs.byId(entry.jobId);
    const subscribed = row ? subscribedWebhook(row.webhook, entry.status) : null;
    if (!row || !subscribed) continue;
    // The job as this change left it: a later change may have moved it on since.
    const then = {
      ...row,
      status: entry.status,
      attempt: entry.attempt,
      error: entry.error,
      updated_at: entry.at,
      ...(entry.status === "running" ? { output: null, finished_at: null } : {}),
    };
    const payload = {
      v: 1 as const,
      type: subscribed.type,
      timestamp: new Date(entry.at).toISOString(),
      data: toJob(then),
    };
    await webhooks.enqueue(
      {
        tenantId: row.tenant_id,
        jobId: row.id,
        eventType: subscribed.type,
        url: subscribed.url,
        payload,
        eventSeq: entry.seq,
      },
      now,
    );
    recorded++;
    gateway.log.warn(
      { job_id: row.id, seq: entry.seq, event: subscribed.type },
      "webhook delivery was never recorded (its gateway stopped); recorded it now",
    );
  }
  await webhooks.clearOutbox(entries);
  return recorded;
}
