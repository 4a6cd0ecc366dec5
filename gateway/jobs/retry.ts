import { HttpProblem } from "../../shared/errors.ts";
import type { JobStatus } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import { admitJob, type JobSlot } from "../limits/backpressure.ts";
import type { JobRow } from "../store/job-rows.ts";
import type { Tenant } from "../store/tenants.ts";
import { afterTransition, afterTransitions } from "./lifecycle.ts";
import { releaseSoon } from "./release.ts";
import { tenantJob } from "./tenant-job.ts";

const RETRYABLE: readonly JobStatus[] = ["failed", "expired", "canceled"];

/**
 * Puts a failed, expired or canceled job back in the queue under the same id: attempts
 * start again, its earlier life stays in its events, and it gets as long to wait as it had
 * the first time (its deadline moves by its original TTL). A model no longer served cannot
 * be retried: no agent would take it; nor can a job whose input upload retention deleted.
 * With `bounded` (a tenant's own retry), the tenant's
 * and the model's queued-job bounds apply as to a submit (429 / 503 with Retry-After); an
 * operator's redrive is bounded by its own page size instead.
 */
export async function retryJob(
  gateway: Gateway,
  tenantId: string,
  id: string,
  bounded?: Tenant,
): Promise<JobRow> {
  const jobs = gateway.stores.jobs;
  const current = await tenantJob(gateway, tenantId, id);
  if (!gateway.models.has(current.model)) {
    throw new HttpProblem(
      409,
      "job_not_retryable",
      "Job cannot be retried",
      `Model "${current.model}" is no longer served.`,
    );
  }
  const retryable = RETRYABLE.includes(current.status as JobStatus);
  const purgedAt = current.inputs_purged_at ?? null;
  if (retryable && purgedAt !== null) {
    // Queued again, it would only fail at the agent (`input_unavailable`, HTTP 404), billed.
    throw new HttpProblem(
      409,
      "input_expired",
      "Job cannot be retried",
      `Its input upload was deleted by retention at ${new Date(purgedAt).toISOString()} (input_retention_seconds): submit a new job with a new upload.`,
    );
  }
  // A job that cannot be retried gets its 409 below, not a 503 for a queue it never joins.
  let slot: JobSlot | null = null;
  if (bounded && retryable) {
    slot = await admitJob(gateway, bounded, current.model);
  }
  const now = gateway.now();
  const ttl = await lifeTtl(gateway, current);
  const result = await jobs.retry(tenantId, id, now, now + ttl, true).catch((error: unknown) => {
    slot?.release();
    throw error;
  });
  if (!result.ok) {
    slot?.release();
    throw new HttpProblem(
      409,
      "job_not_retryable",
      "Job cannot be retried",
      `The job is ${result.current?.status ?? current.status}; only failed, expired or canceled jobs can be retried.`,
    );
  }
  // Its batch, if it had ended, is in progress again until this job ends (batches.ts).
  if (result.job.batch_id) await jobs.reopenBatch(result.job.batch_id, now);
  if (slot) slot.queued();
  else {
    // An operator's redrive, unbounded: still counted into this process's readings.
    gateway.admission.queueDepth.bump(current.model);
    gateway.admission.tenantQueued.bump(tenantId);
  }
  afterTransition(gateway, result.job);
  // Held again, as a new job is: released in fair order (release.ts); a failed pass leaves
  // it held for the sweep's.
  await releaseSoon(gateway, result.job.model);
  return result.job;
}

/**
 * How long the job's current life was given to wait: from the event that began it (its
 * submit, or the retry before this one: `queued` at attempt 0) to its deadline. Counted from
 * `created_at` instead, it held only for the first life: each retry moves the deadline but not
 * the creation, so every retry added the whole time since the submit (a 10 s TTL became 23 s,
 * then 44 minutes).
 */
async function lifeTtl(gateway: Gateway, row: JobRow): Promise<number> {
  const events = await gateway.stores.jobs.eventsAfter(row.id, 0);
  const began = events.findLast((event) => event.status === "queued" && event.attempt === 0);
  return Number(row.expires_at) - Number(began?.at ?? row.created_at);
}

/**
 * An operator's redrive of dead letters (`POST /v1/admin/dead-letters/redrive`): `retryJob`
 * for each, unbounded, but together: one read of when their lives began, one UPDATE, one
 * reopen of their batches and one release pass per model, not those per job. On Workers a
 * page of 500 made about 4 500 D1 queries, where an invocation may make 1 000. Returns the
 * ids put back and, with why, those that were not, in `rows`' order.
 */
export async function redriveJobs(
  gateway: Gateway,
  rows: readonly JobRow[],
): Promise<{ redriven: string[]; skipped: { id: string; code: string }[] }> {
  const skipped = new Map<string, string>();
  const candidates = rows.filter((row) => {
    if (!gateway.models.has(row.model)) skipped.set(row.id, "job_not_retryable");
    else if ((row.inputs_purged_at ?? null) !== null) skipped.set(row.id, "input_expired");
    return !skipped.has(row.id);
  });
  const jobs = gateway.stores.jobs.bulk;
  const now = gateway.now();
  const began = await jobs.lifeBegins(candidates.map((row) => row.id));
  const lives = candidates.map((row) => ({
    id: row.id,
    expiresAt: now + Number(row.expires_at) - (began.get(row.id) ?? Number(row.created_at)),
  }));
  const retried = await jobs.retry(lives, now);
  const batchIds = retried.map((row) => row.batch_id).filter((id) => id !== null);
  await jobs.reopenBatches([...new Set(batchIds)], now);
  for (const row of retried) {
    gateway.admission.queueDepth.bump(row.model);
    gateway.admission.tenantQueued.bump(row.tenant_id);
  }
  afterTransitions(gateway, retried);
  for (const model of new Set(retried.map((row) => row.model))) await releaseSoon(gateway, model);
  const back = new Set(retried.map((row) => row.id));
  for (const row of candidates) if (!back.has(row.id)) skipped.set(row.id, "job_not_retryable");
  return {
    redriven: rows.filter((row) => back.has(row.id)).map((row) => row.id),
    skipped: rows.flatMap((row) => {
      const code = skipped.get(row.id);
      return code ? [{ id: row.id, code }] : [];
    }),
  };
}
