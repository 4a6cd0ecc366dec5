import type { BatchWebhookPayload } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { BatchRow } from "../store/batches.ts";
import type { JobRow } from "../store/job-rows.ts";
import type { DeliverDeps } from "../webhooks/deliveries.ts";
import { sendFirstAttempt } from "../webhooks/first-attempts.ts";
import { batchView } from "./batch-view.ts";

/**
 * Batch completion, apart from batches.ts so that lifecycle.ts can call it without an
 * import cycle (it hands over its webhook deps instead of being imported for them).
 */

/**
 * After a batch job's change: once none of its jobs is queued or running, the batch is
 * completed and its webhook sent. Each check runs after its own job's change committed, so
 * the check after the last change sees every job terminal.
 */
export function afterBatchJobChange(gateway: Gateway, job: JobRow, deps: DeliverDeps): void {
  if (!job.batch_id || job.status === "queued" || job.status === "running") return;
  gateway.background(
    completeIfDone(gateway, job.batch_id, deps).catch((error: unknown) => {
      gateway.log.error({ batch_id: job.batch_id, err: String(error) }, "batch check failed");
    }),
  );
}

export async function completeIfDone(
  gateway: Gateway,
  batchId: string,
  deps: DeliverDeps,
): Promise<BatchRow | null> {
  const counts = await gateway.stores.jobs.batchJobCounts(batchId);
  if ((counts.get("queued") ?? 0) + (counts.get("running") ?? 0) > 0) return null;
  const done = await gateway.stores.jobs.completeBatch(batchId, gateway.now());
  if (!done) return null;
  if (done.webhook) await sendBatchWebhook(gateway, done, JSON.parse(done.webhook).url, deps);
  return done;
}

async function sendBatchWebhook(
  gateway: Gateway,
  row: BatchRow,
  url: string,
  deps: DeliverDeps,
): Promise<void> {
  const now = gateway.now();
  const payload: BatchWebhookPayload = {
    v: 1,
    type: "batch.completed",
    timestamp: new Date(now).toISOString(),
    data: await batchView(gateway, row),
  };
  const webhooks = gateway.stores.webhooks;
  // One delivery per batch: the batch id stands where a job id would, event 1.
  const id = await webhooks.enqueue(
    { tenantId: row.tenant_id, jobId: row.id, eventType: payload.type, url, payload, eventSeq: 1 },
    now,
  );
  await sendFirstAttempt(gateway, row.tenant_id, webhooks, id, deps);
}
