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

export const JOB_RETRY_BASE_MS = 1_000;
export const JOB_RETRY_CAP_MS = 60_000;

/** The delay before delivery `attempt + 1`, for an attempt (1-based) that just failed. */
export function backoffMs(attempt: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? JOB_RETRY_BASE_MS;
  const cap = options.capMs ?? JOB_RETRY_CAP_MS;
  const random = options.random ?? Math.random;
  // Clamp the exponent so a large attempt count cannot overflow to Infinity.
  const exponent = Math.min(Math.max(attempt, 1) - 1, 30);
  const ceiling = Math.min(cap, base * 2 ** exponent);
  return Math.floor(random() * ceiling);
}
