/**
 * Counts that bound admission (a model's queue depth, a tenant's queued jobs), read at most
 * once per period instead of on every submit. Each is an O(queue) read that would otherwise
 * run once per request and grow slower exactly when the queue is deep. Concurrent readers
 * share one read in flight (but on Workers: see `shareReads`), and what this process
 * admitted since is counted in, so a burst inside one period still sees the count grow.
 *
 * Room is taken with `reserve`: the count and the taking happen with no await between
 * them, so concurrent submits and batches in this process cannot all see the same stale
 * count and together pass the bound; the places they hold count for everyone until the
 * jobs are committed (then they are part of the count) or given back.
 */
export interface CachedCounts {
  /**
   * The count for `key` (the reading plus places held), from `load` when the last reading
   * is older than the period, or always with `fresh` (to confirm a reading before acting
   * on it).
   */
  read(key: string, load: () => Promise<number>, options?: { fresh?: boolean }): Promise<number>;
  /** One more, counted into the current reading (if any) until the next real read. */
  bump(key: string): void;
  /**
   * Holds up to `want` places below `bound`, counted from the cached reading; with
   * `confirm`, read afresh first when it leaves less room than wanted (jobs that started or
   * were canceled meanwhile make room). `granted` may be anything from 0 to `want`.
   */
  reserve(
    key: string,
    want: number,
    bound: number,
    load: () => Promise<number>,
    options?: { confirm?: boolean },
  ): Promise<Reservation>;
}

/** Places held by one `reserve`; each is either used (a job was queued) or given back. */
export interface Reservation {
  readonly granted: number;
  /** The count when the places were taken, those places not included. */
  readonly countBefore: number;
  /** One held place became a queued job: counted as `bump` does, no longer held. */
  use(): void;
  /**
   * Gives back `count` places (default: every one neither used nor given back yet); never
   * more than are left. Safe to call more than once.
   */
  release(count?: number): void;
}

interface Reading {
  value: number;
  readAt: number;
  /** Places reserved and not yet used or given back: counted by every reader. */
  held: number;
  /** The read in flight that later readers wait for, when reads are shared. */
  shared: Promise<void> | null;
  /**
   * The reads in flight, each with the places used while it ran: it may have counted them or
   * not, so they are added to what it returns (a job counted twice until the next read,
   * never none).
   */
  reads: Set<{ used: number }>;
}

/**
 * `shareReads: false` (Workers, whose isolate serves many requests with one set of counts):
 * each reader that finds the reading old reads for itself. A read begun by one request is
 * that request's I/O: another request awaiting it is settled from the wrong context, which
 * workerd flags ("A promise was resolved or rejected from a different request context"), and
 * should the first request be torn down before the read returns (canceled, out of CPU), the
 * read never settles and every submit waiting on it would hang. (A client that merely hangs
 * up does not tear a request down in workerd before it writes: seen in miniflare.)
 */
export function cachedCounts(
  periodMs: number,
  now: () => number,
  { shareReads = true }: { shareReads?: boolean } = {},
): CachedCounts {
  const readings = new Map<string, Reading>();
  const reading = (key: string): Reading => {
    let found = readings.get(key);
    if (!found) {
      found = {
        value: 0,
        readAt: Number.NEGATIVE_INFINITY,
        held: 0,
        shared: null,
        reads: new Set(),
      };
      readings.set(key, found);
    }
    return found;
  };
  /** Brings `key`'s reading up to date (or afresh); the caller reads it after the await. */
  async function refresh(key: string, load: () => Promise<number>, fresh: boolean) {
    const current = reading(key);
    if (current.shared) {
      await current.shared;
      return;
    }
    if (!fresh && now() - current.readAt < periodMs) return;
    // (On Workers, a torn-down request's read stays in `reads`: a few bytes, until the isolate goes.)
    const read = { used: 0 };
    current.reads.add(read);
    const done = load().then((value) => {
      current.value = value + read.used;
      current.readAt = now();
    });
    const settled = done.finally(() => {
      current.reads.delete(read);
      if (current.shared === settled) current.shared = null;
    });
    if (shareReads) current.shared = settled;
    await settled;
  }
  /** A place used now: counted into the reading and into every read in flight. */
  const used = (current: Reading) => {
    current.value += 1;
    for (const read of current.reads) read.used += 1;
  };
  return {
    async read(key, load, options = {}) {
      await refresh(key, load, options.fresh === true);
      const current = reading(key);
      return current.value + current.held;
    },
    bump(key) {
      const current = readings.get(key);
      if (current) used(current);
    },
    async reserve(key, want, bound, load, options = {}) {
      await refresh(key, load, false);
      let current = reading(key);
      if (options.confirm && current.value + current.held + want > bound) {
        await refresh(key, load, true);
        current = reading(key);
      }
      // From here to the return, nothing awaits: the count and the hold are one step.
      const countBefore = current.value + current.held;
      const granted = Math.max(0, Math.min(want, bound - countBefore));
      current.held += granted;
      let left = granted;
      return {
        granted,
        countBefore,
        use() {
          if (left <= 0) return;
          left -= 1;
          current.held -= 1;
          used(current);
        },
        release(count = left) {
          const back = Math.max(0, Math.min(count, left));
          current.held -= back;
          left -= back;
        },
      };
    },
  };
}
