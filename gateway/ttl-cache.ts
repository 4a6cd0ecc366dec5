/**
 * Values remembered for a short while, per gateway process: verified API keys and agent
 * rows, so a busy client or agent costs one lookup per period instead of one per request.
 * Only what verified is stored (a flood of wrong keys cannot fill it, each is refused after
 * a real lookup), and the map is bounded: when full it starts over rather than tracking
 * recency.
 */
export interface TtlCache<V> {
  get(key: string): V | null;
  set(key: string, value: V): void;
  delete(key: string): void;
  /** Forgets everything: after a revocation or a change of plan. */
  clear(): void;
}

const MAX_ENTRIES = 10_000;

/** A cache whose entries live `ttlMs`; 0 caches nothing. */
export function ttlCache<V>(ttlMs: number, now: () => number): TtlCache<V> {
  const entries = new Map<string, { value: V; until: number }>();
  return {
    get(key) {
      const entry = entries.get(key);
      if (!entry) return null;
      if (entry.until > now()) return entry.value;
      entries.delete(key);
      return null;
    },
    set(key, value) {
      if (ttlMs <= 0) return;
      if (entries.size >= MAX_ENTRIES) entries.clear();
      entries.set(key, { value, until: now() + ttlMs });
    },
    delete(key) {
      entries.delete(key);
    },
    clear() {
      entries.clear();
    },
  };
}
