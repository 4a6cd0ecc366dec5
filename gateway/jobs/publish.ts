import type { QueueMessage } from "../../shared/protocol/index.ts";
import { formatTraceparent, parseTraceparent } from "../../shared/trace.ts";
import type { Gateway } from "../context.ts";
import type { JobRow } from "../store/job-rows.ts";

export function queueMessageOf(row: JobRow): QueueMessage {
  // As version 00: a job submitted with a later version's header before submits read it so
  // kept it as sent, too long for the message, and no publish of it could ever succeed.
  const trace = parseTraceparent(row.traceparent);
  return {
    v: 1,
    id: row.id,
    model: row.model,
    priority: row.priority,
    attempt: row.attempt,
    deadline: new Date(row.expires_at).toISOString(),
    ...(trace ? { traceparent: formatTraceparent(trace) } : {}),
  };
}

/**
 * Publishes a committed job. A failure here loses nothing: the job stays unpublished and
 * the sweeper's outbox pass publishes it again.
 *
 * With `markInBackground` the answer does not wait for the published mark: a submit's 202
 * only needs the commit and the broker's confirm. A mark that never lands means at worst
 * one extra copy of the message from the outbox, which agents already tolerate (a claim of
 * a job that is no longer queued is refused).
 */
export async function publishJob(
  gateway: Gateway,
  row: JobRow,
  options: { markInBackground?: boolean } = {},
): Promise<boolean> {
  try {
    await gateway.queue.publish(queueMessageOf(row));
    const marked = gateway.stores.jobs.markPublished(row.id, gateway.now());
    if (options.markInBackground) gateway.background(marked);
    else await marked;
    return true;
  } catch (error) {
    publishFailed(gateway, { job_id: row.id }, error);
    return false;
  }
}

/**
 * Publishes committed jobs (a release pass's), in their order: a tenant's jobs of one band
 * must reach the agents oldest first. A queue that keeps the order of publishes made
 * together gets them all at once (one broker round trip for the pass, not one per job: a
 * confirm each capped a tenant alone at a window per few round trips); one that publishes
 * many in order (`publishMany`: the sql queue, one statement, not a commit each) gets them in
 * one call; any other one after another. Marked published in the background, as
 * `publishJob` does, unless `awaitMarks`. A failure loses nothing: the jobs stay unpublished
 * and the sweeper's outbox publishes them again. Returns how many were published.
 */
export async function publishJobs(
  gateway: Gateway,
  rows: readonly JobRow[],
  options: { awaitMarks?: boolean } = {},
): Promise<number> {
  const { queue } = gateway;
  const markInBackground = !options.awaitMarks;
  const one = (row: JobRow) => publishJob(gateway, row, { markInBackground });
  if (queue.publishesInOrder) {
    return (await Promise.all(rows.map(one))).filter(Boolean).length;
  }
  if (!queue.publishMany || rows.length < 2) {
    let published = 0;
    for (const row of rows) if (await one(row)) published++;
    return published;
  }
  const ids = rows.map((row) => row.id);
  try {
    await queue.publishMany(rows.map(queueMessageOf));
    const marked = gateway.stores.jobs.bulk.markPublished(ids, gateway.now());
    if (markInBackground) gateway.background(marked);
    else await marked;
  } catch (error) {
    publishFailed(gateway, { job_ids: ids }, error);
    return 0;
  }
  return rows.length;
}

function publishFailed(gateway: Gateway, jobs: object, error: unknown): void {
  gateway.log.error({ ...jobs, err: String(error) }, "publish failed; the sweeper will retry");
}
