/**
 * The consumer priority (`x-priority`) of an overflow consumer: below the default 0 of
 * every other, so the broker gives it messages only while they are all at their prefetch.
 */
export const OVERFLOW_CONSUMER_PRIORITY = -10;

interface Parked {
  readonly parked: boolean;
  readonly priority: number;
  /** When the message became ready, ms since the epoch. */
  readonly readyAt: number;
}

/**
 * The parked delivery to run next: highest priority first, then arrival order, among those
 * that have waited `minAgeMs` (all of them when it is 0); and, when none has, how long
 * until the first one will have.
 */
export function mostUrgentRipe<T extends Parked>(
  deliveries: readonly T[],
  minAgeMs: number,
  now: number,
): { best: T | undefined; ripensInMs: number | null } {
  let best: T | undefined;
  let nextRipe = Number.POSITIVE_INFINITY;
  for (const delivery of deliveries) {
    if (!delivery.parked) continue;
    const ripeAt = delivery.readyAt + minAgeMs;
    if (minAgeMs > 0 && ripeAt > now) {
      nextRipe = Math.min(nextRipe, ripeAt);
      continue;
    }
    if (!best || delivery.priority > best.priority) best = delivery;
  }
  return { best, ripensInMs: Number.isFinite(nextRipe) ? nextRipe - now : null };
}
