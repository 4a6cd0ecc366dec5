import type { AuthenticatedKey, Tenant } from "./store/tenants.ts";

export interface KeyHolder {
  tenant: Tenant;
  key: AuthenticatedKey;
}

/**
 * Verified API keys, remembered for a short while: a client sending many requests costs one
 * hash and one indexed read per period instead of per request. Only keys that verified are
 * kept (a flood of wrong keys cannot fill it, and each is refused after a real lookup), and
 * the map is bounded: when full it starts over rather than tracking recency.
 */
export interface KeyCache {
  get(token: string): KeyHolder | null;
  set(token: string, holder: KeyHolder): void;
  /** Forgets every key: after a revocation or a change of plan. */
  clear(): void;
}

const MAX_KEYS = 10_000;

export function keyCache(ttlMs: number, now: () => number): KeyCache {
  const entries = new Map<string, { holder: KeyHolder; until: number }>();
  return {
    get(token) {
      const entry = entries.get(token);
      if (!entry) return null;
      if (entry.until > now()) return entry.holder;
      entries.delete(token);
      return null;
    },
    set(token, holder) {
      if (ttlMs <= 0) return;
      if (entries.size >= MAX_KEYS) entries.clear();
      entries.set(token, { holder, until: now() + ttlMs });
    },
    clear() {
      entries.clear();
    },
  };
}
