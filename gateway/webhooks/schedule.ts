/**
 * The Standard Webhooks retry schedule: after the first (immediate) attempt, retry after
 * 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h, then give up. Eight attempts in all, spread
 * over about a day and a half, so a receiver that is down for a deploy or a night still
 * gets the event.
 */
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

export const RETRY_DELAYS_MS: readonly number[] = [
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  10 * HOUR,
];

/** The most attempts one delivery gets: the first plus one per retry delay. */
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/** ±10%, so deliveries that failed together (a receiver outage) do not retry in lockstep. */
const JITTER = 0.1;

/**
 * How long to wait before the next attempt, given how many attempts were already made;
 * null once the schedule is exhausted. `random` returns a number in [0, 1) (injected in
 * tests); 0.5 gives the exact scheduled delay.
 */
export function nextAttemptDelayMs(
  attemptsMade: number,
  random: () => number = Math.random,
): number | null {
  if (attemptsMade <= 0) return 0;
  const base = RETRY_DELAYS_MS[attemptsMade - 1];
  if (base === undefined) return null;
  const factor = 1 + (random() * 2 - 1) * JITTER;
  return Math.round(base * factor);
}

/**
 * The most a receiver's `Retry-After` can push the next attempt out. A receiver that asks
 * for more still gets its retry after a day rather than never; the attempt still counts,
 * so the schedule still ends.
 */
export const RETRY_AFTER_CAP_MS = 24 * HOUR;

/**
 * `Retry-After` (delay-seconds or an HTTP-date) as milliseconds from `now`; null when
 * absent or unreadable. A date in the past means "now".
 */
export function parseRetryAfterMs(value: string | undefined, now: number): number | null {
  const text = value?.trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) return Math.min(Number(text) * SECOND, RETRY_AFTER_CAP_MS);
  const date = Date.parse(text);
  return Number.isNaN(date) ? null : Math.min(Math.max(0, date - now), RETRY_AFTER_CAP_MS);
}

/**
 * The wait after a failed attempt: the scheduled delay, but at least what the receiver
 * asked for in `Retry-After` (capped). Null once the schedule is exhausted, or on
 * `410 Gone`: the receiver says the endpoint is retired, and retrying would only annoy it.
 */
export function delayAfterFailureMs(
  attemptsMade: number,
  failure: { statusCode: number | null; retryAfterMs: number | null },
  random: () => number = Math.random,
): number | null {
  if (failure.statusCode === 410) return null;
  const scheduled = nextAttemptDelayMs(attemptsMade, random);
  if (scheduled === null) return null;
  return Math.max(scheduled, failure.retryAfterMs ?? 0);
}
