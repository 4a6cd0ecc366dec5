import type { JobError } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import { afterTransition, publishJob } from "../jobs/lifecycle.ts";
import type { JobRow } from "../store/job-rows.ts";

/**
 * Keeps the job store and the queue from disagreeing for long about a job's message.
 *
 * A queued job that was claimed before (so it is a retry: its message comes back within
 * the retry backoff and a lease) but that nothing has changed or published for
 * `silentMs` has most likely lost its message: the queue dead-lettered it when its
 * attempts ran out without the gateway hearing of the last one (an agent killed before its
 * claim, a claim while the gateway was down), or it is gone. Without this the job would
 * sit `queued` until its TTL (a day by default). Used up its attempts: it fails, saying
 * why; else it is published again. A message that was in fact still waiting behind a long
 * backlog then has a twin, which is harmless: whichever is claimed second is refused
 * (the job is no longer queued) and acked.
 *
 * On queues that can look a message up (`JobQueue.absent`: redis, nats) sweep-lost.ts
 * answers the question exactly; this pass is for the others.
 */
export async function settleSilentQueued(
  gateway: Gateway,
  now: number,
  options: { silentMs: number; maxAttempts: number; batch: number },
): Promise<{ failed: number; republished: number }> {
  let failed = 0;
  let republished = 0;
  if (gateway.queue.absent) return { failed, republished };
  const before = now - options.silentMs;
  for (const row of await gateway.stores.jobs.silentQueued(before, options.batch)) {
    const outcome = await republishOrFail(gateway, row, options.maxAttempts, now, {
      silentSeconds: Math.round((now - Math.max(row.updated_at, row.published_at ?? 0)) / 1000),
    });
    if (outcome === "failed") failed++;
    else if (outcome === "republished") republished++;
  }
  return { failed, republished };
}

/**
 * A queued job whose message is gone: failed with the reason once it was claimed
 * `maxAttempts` times (its message was dead-lettered for that), else published again.
 */
export async function republishOrFail(
  gateway: Gateway,
  row: JobRow,
  maxAttempts: number,
  now: number,
  why: { silentSeconds?: number },
): Promise<"failed" | "republished" | "unchanged"> {
  const jobs = gateway.stores.jobs;
  const claims = await jobs.claims(row.id);
  if (claims < maxAttempts) {
    gateway.log.warn(
      { job_id: row.id, claims, silent_s: why.silentSeconds },
      "queued job's message is gone from the queue; publishing it again",
    );
    return (await publishJob(gateway, row)) ? "republished" : "unchanged";
  }
  const silent =
    why.silentSeconds === undefined
      ? ""
      : ` and nothing was heard of it for ${why.silentSeconds} s`;
  const error: JobError = {
    type: "permanent",
    code: "attempts_exhausted",
    message: `the queue no longer holds the job's message (dead-lettered after its attempts ran out)${silent}; it was claimed ${claims} times (the most allowed is ${maxAttempts})`,
  };
  const result = await jobs.failQueued(row, error, now);
  if (!result.ok) return "unchanged";
  gateway.log.warn({ job_id: row.id, claims }, "queued job's message was dead-lettered; failed it");
  afterTransition(gateway, result.job);
  return "failed";
}
