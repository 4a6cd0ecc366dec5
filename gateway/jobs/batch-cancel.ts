import type { Batch } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { BatchRow } from "../store/batches.ts";
import { completeIfDone } from "./batch-completion.ts";
import { batchView } from "./batch-view.ts";
import { afterTransitions, webhookDeps } from "./lifecycle.ts";

/** Jobs canceled per read of the batch's active ones. */
const CANCEL_PAGE = 1_000;

/**
 * Cancels every job of the batch still queued or running, then completes the batch here
 * rather than leaving it to the checks each job's change starts in the background: the
 * answer shows the batch as it now is (`canceled`, with its `completed_at`), not
 * `in_progress` with every job already ended.
 */
export async function cancelBatch(gateway: Gateway, row: BatchRow): Promise<Batch> {
  const now = gateway.now();
  await gateway.stores.jobs.markBatchCanceled(row.id, now);
  let after: string | undefined;
  for (;;) {
    const page = await gateway.stores.jobs.batchJobs(row.id, {
      limit: CANCEL_PAGE,
      active: true,
      ...(after ? { after } : {}),
    });
    // One statement a page, not one a job: on Workers an invocation may make 1 000 D1
    // queries at most (https://developers.cloudflare.com/d1/platform/limits/).
    const ids = page.map((job) => job.id);
    afterTransitions(gateway, await gateway.stores.jobs.bulk.cancel(ids, now, row.tenant_id));
    if (page.length < CANCEL_PAGE) break;
    after = page.at(-1)?.id;
  }
  // Completed once: whichever check comes first (this one or a job's) sends the webhook.
  const completed = await completeIfDone(gateway, row.id, webhookDeps(gateway));
  const fresh =
    completed ?? (await gateway.stores.jobs.batchForTenant(row.tenant_id, row.id)) ?? row;
  return batchView(gateway, fresh);
}
