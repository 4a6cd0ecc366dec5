/**
 * Counts that bound admission (a model's queue depth, a tenant's queued jobs), read at most
 * once per period instead of on every submit. Each is an O(queue) read that would otherwise
 * run once per request and grow slower exactly when the queue is deep. Concurrent readers
 * share one read in flight, and `bump` counts what this process admitted since, so a burst
 * inside one period still sees the count grow.
 */
export interface CachedCounts {
  /**
   * The count for `key`, from `load` when the last reading is older than the period, or
   * always with `fresh` (to confirm a reading before acting on it).
   */
  read(key: string, load: () => Promise<number>, options?: { fresh?: boolean }): Promise<number>;
  /** One more, counted into the current reading (if any) until the next real read. */
  bump(key: string): void;
}

interface Reading {
  value: number;
  readAt: number;
  /** Set while a read is in flight. */
  pending: Promise<number> | null;
}

export function cachedCounts(periodMs: number, now: () => number): CachedCounts {
  const readings = new Map<string, Reading>();
  return {
    async read(key, load, options = {}) {
      const cached = readings.get(key);
      if (cached?.pending) return cached.pending;
      if (cached && !options.fresh && now() - cached.readAt < periodMs) return cached.value;
      const reading: Reading = cached ?? { value: 0, readAt: 0, pending: null };
      reading.pending = load();
      readings.set(key, reading);
      try {
        reading.value = await reading.pending;
        reading.readAt = now();
      } finally {
        reading.pending = null;
      }
      return reading.value;
    },
    bump(key) {
      const reading = readings.get(key);
      if (reading) reading.value += 1;
    },
  };
}
