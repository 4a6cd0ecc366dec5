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
  /**
   * The value for `key`: the cached one, else what `load` finds, kept for the period unless
   * null. Callers that miss while a load for the same key is under way share it: when a
   * busy client's entry lapses, its requests in flight (64 connections, say) cost one store
   * read, not one each. A load under way when the key is deleted or the cache cleared (a
   * revocation) is neither shared with later callers nor kept: it began before the change.
   */
  getOrLoad(key: string, load: () => Promise<V | null>): Promise<V | null>;
  delete(key: string): void;
  /** Forgets everything: after a revocation or a change of plan. */
  clear(): void;
}

const MAX_ENTRIES = 10_000;

/**
 * A cache whose entries live `ttlMs`; 0 caches nothing. `shareLoads: false` (Workers, whose
 * isolate serves many requests with one cache): each caller loads for itself, since a load
 * begun by one request is I/O of that request (limits/cached-count.ts says why that matters).
 */
export function ttlCache<V>(
  ttlMs: number,
  now: () => number,
  { shareLoads = true }: { shareLoads?: boolean } = {},
): TtlCache<V> {
  const entries = new Map<string, { value: V; until: number }>();
  const loading = new Map<string, Promise<V | null>>();
  /** Moves on with every delete and clear: a load begun before one does not keep its value. */
  let generation = 0;
  const cache: TtlCache<V> = {
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
    getOrLoad(key, load) {
      const cached = cache.get(key);
      if (cached !== null) return Promise.resolve(cached);
      if (ttlMs <= 0) return load();
      const shared = loading.get(key);
      if (shared) return shared;
      const begun = generation;
      const loaded = load()
        .then((value) => {
          if (value !== null && generation === begun) cache.set(key, value);
          return value;
        })
        .finally(() => {
          if (loading.get(key) === loaded) loading.delete(key);
        });
      if (shareLoads) loading.set(key, loaded);
      return loaded;
    },
    delete(key) {
      generation++;
      entries.delete(key);
      loading.delete(key);
    },
    clear() {
      generation++;
      entries.clear();
      loading.clear();
    },
  };
  return cache;
}
