/**
 * How a failed attempt comes back, as the agents retry it and the gateway judges a queued
 * job's wait by it (gateway/jobs/waiting.ts): one fact for both sides.
 *
 * An attempt that failed transiently is retried by the queue after a backoff with full
 * jitter, uniform in [0, `retryCeilingMs(attempt)`] (gpu-agent/backoff.ts). Past that ceiling
 * the retry is no longer waiting out a backoff.
 */
export const JOB_RETRY_BASE_MS = 1_000;
export const JOB_RETRY_CAP_MS = 60_000;

/** The longest the retry after failed attempt `attempt` (1-based) waits in the queue. */
export function retryCeilingMs(
  attempt: number,
  baseMs = JOB_RETRY_BASE_MS,
  capMs = JOB_RETRY_CAP_MS,
): number {
  // Clamp the exponent so a large attempt count cannot overflow to Infinity.
  const exponent = Math.min(Math.max(attempt, 1) - 1, 30);
  return Math.min(capMs, baseMs * 2 ** exponent);
}

/**
 * The error of an attempt whose agent went silent: the sweeper puts the job back and
 * publishes it again at once, with no backoff.
 */
export const AGENT_LOST_CODE = "agent_lost";
