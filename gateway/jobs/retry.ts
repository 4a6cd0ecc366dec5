import { HttpProblem, notFound } from "../../shared/errors.ts";
import type { Gateway } from "../context.ts";
import type { JobRow } from "../store/job-rows.ts";
import { afterTransition, publishJob } from "./lifecycle.ts";

/**
 * Puts a failed, expired or canceled job back in the queue under the same id: attempts
 * start again, its earlier life stays in its events, and it gets as long to wait as it had
 * the first time (its deadline moves by its original TTL). A model no longer served cannot
 * be retried: no agent would take it.
 */
export async function retryJob(gateway: Gateway, tenantId: string, id: string): Promise<JobRow> {
  const jobs = gateway.stores.jobs;
  const current = await jobs.forTenant(tenantId, id);
  if (!current) throw notFound("Job", id);
  if (!gateway.models.has(current.model)) {
    throw new HttpProblem(
      409,
      "job_not_retryable",
      "Job cannot be retried",
      `Model "${current.model}" is no longer served.`,
    );
  }
  const now = gateway.now();
  const ttl = current.expires_at - current.created_at;
  const result = await jobs.retry(tenantId, id, now, now + ttl);
  if (!result.ok) {
    throw new HttpProblem(
      409,
      "job_not_retryable",
      "Job cannot be retried",
      `The job is ${result.current?.status ?? current.status}; only failed, expired or canceled jobs can be retried.`,
    );
  }
  afterTransition(gateway, result.job);
  // A failed publish leaves the job unpublished: the outbox pass publishes it later.
  await publishJob(gateway, result.job, { markInBackground: true });
  return result.job;
}
