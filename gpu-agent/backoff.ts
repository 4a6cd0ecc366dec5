import { retryCeilingMs } from "../shared/job-retry.ts";

/**
 * Exponential backoff with full jitter (AWS architecture blog, "Exponential Backoff And
 * Jitter"): the delay is uniform in [0, min(cap, base * 2^(attempt-1))]. Full jitter
 * spreads a burst of failures (every agent losing the gateway at once) across the whole
 * window instead of having them retry in lockstep.
 */
export interface BackoffOptions {
  baseMs?: number;
  capMs?: number;
  /** Uniform in [0, 1); injectable so tests can pin the delay. */
  random?: () => number;
}

export { JOB_RETRY_BASE_MS, JOB_RETRY_CAP_MS } from "../shared/job-retry.ts";

/** The delay before delivery `attempt + 1`, for an attempt (1-based) that just failed. */
export function backoffMs(attempt: number, options: BackoffOptions = {}): number {
  const random = options.random ?? Math.random;
  return Math.floor(random() * retryCeilingMs(attempt, options.baseMs, options.capMs));
}

/**
 * Waiting for a peer that is down (the gateway, the queue): exponential up to `cap`, with
 * "equal jitter" (half the ceiling fixed, half random), so retries never come back to back
 * yet agents that lost the peer together still spread out.
 */
export interface WaitBackoffOptions {
  baseMs?: number;
  capMs?: number;
  random?: () => number;
}

export const PEER_RETRY_BASE_MS = 500;
export const PEER_RETRY_CAP_MS = 15_000;

/** The wait before try `round + 1` after `round` (1-based) failed tries in a row. */
export function peerRetryDelayMs(round: number, options: WaitBackoffOptions = {}): number {
  const base = options.baseMs ?? PEER_RETRY_BASE_MS;
  const cap = options.capMs ?? PEER_RETRY_CAP_MS;
  const random = options.random ?? Math.random;
  const ceiling = Math.min(cap, base * 2 ** Math.min(Math.max(round, 1) - 1, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

export { pause } from "../shared/pause.ts";
