import {
  type BucketChange,
  FORGET_GATEWAY_MS,
  type SharedBucket,
  type SharedBucketStore,
} from "./shared-bucket.ts";

/**
 * Where gateways keep the buckets they share (shared-bucket.ts): Redis, or this process's
 * memory for tests. The Postgres store speaks SQL, so it lives with the store
 * (store/rate-counters.ts).
 */

/** A store's round as its three steps, one after the other. */
interface RoundSteps {
  heartbeat(gateway: string, now: number, liveMs: number): Promise<string[]>;
  update: SharedBucketStore["update"];
  list(): Promise<Map<string, SharedBucket>>;
}

/**
 * A round as the heartbeat, the update and the listing in turn: for Redis, where each is
 * one exchange (the update's compare-and-set script retries a bucket another gateway
 * changed in between), and memory.
 */
function roundInSteps(steps: RoundSteps): SharedBucketStore["round"] {
  return async ({ gateway, now, liveMs, keys, change, list }) => {
    const live = await steps.heartbeat(gateway, now, liveMs);
    const settled = keys.length > 0 ? await steps.update(keys, change(new Set(live))) : new Map();
    return { live, settled, heard: list ? await steps.list() : null };
  };
}

/**
 * Compares each bucket with what the gateway read and, for every one unchanged since, stores
 * its new value (or removes it); answers the positions (1-based) of those another gateway
 * changed meanwhile, which the gateway reads and settles again. KEYS: the set of bucket
 * names, then each bucket's key. ARGV: for each, its name, what was read ("" for none) and
 * its new value ("" to remove).
 */
const COMPARE_AND_SET = `
local changed = {}
for i = 2, #KEYS do
  local at = (i - 2) * 3
  local current = redis.call('GET', KEYS[i])
  if not current then current = '' end
  if current ~= ARGV[at + 2] then
    table.insert(changed, i - 1)
  elseif ARGV[at + 3] == '' then
    redis.call('DEL', KEYS[i])
    redis.call('SREM', KEYS[1], ARGV[at + 1])
  else
    redis.call('SET', KEYS[i], ARGV[at + 3], 'PX', 86400000)
    redis.call('SADD', KEYS[1], ARGV[at + 1])
    redis.call('PEXPIRE', KEYS[1], 86400000)
  end
end
return changed`;

/**
 * The shared buckets in Redis: one JSON value per tenant (kept a day after its last change)
 * and a set naming them, changed by compare-and-set in one script per round (a bucket
 * another gateway changed in between is read and settled again); the gateways alive in a
 * sorted set by when each was last heard from. Every name starts with `prefix`.
 */
export async function redisBuckets(
  url: string,
  prefix = "gantry:rate",
): Promise<SharedBucketStore> {
  const { createClient } = await import("redis");
  const client = createClient({ url });
  client.on("error", () => {
    // Reported by the failing round (SharedRateLimiter's onError); the client reconnects.
  });
  await client.connect();
  const names = `${prefix}:buckets`;
  const gateways = `${prefix}:gateways`;
  const bucketKey = (key: string) => `${prefix}:bucket:${key}`;
  const parse = (text: string | null | undefined) =>
    text ? (JSON.parse(text) as SharedBucket) : null;
  const steps: RoundSteps = {
    async heartbeat(gateway, now, liveMs) {
      const replies = await client
        .multi()
        .zAdd(gateways, { score: now, value: gateway }, { comparison: "GT" })
        .zRemRangeByScore(gateways, "-inf", now - FORGET_GATEWAY_MS)
        .zRangeByScore(gateways, now - liveMs, "+inf")
        // Gone with the last gateway: nothing of a store no gateway uses stays behind.
        .pExpire(gateways, FORGET_GATEWAY_MS)
        .exec();
      return (replies[2] as unknown as string[]).map(String);
    },
    async update(keys, change: BucketChange) {
      const result = new Map<string, SharedBucket | null>();
      let pending = [...new Set(keys)];
      for (let attempt = 0; pending.length > 0; attempt++) {
        if (attempt >= 20) throw new Error("rate limits: buckets kept changing under the round");
        const read = await client.mGet(pending.map(bucketKey));
        const writes = pending.map((key, i) => {
          const before = read[i] ?? "";
          const after = change(key, parse(before));
          return { key, before, after: after === null ? "" : JSON.stringify(after), value: after };
        });
        const changed = (await client.eval(COMPARE_AND_SET, {
          keys: [names, ...pending.map(bucketKey)],
          arguments: writes.flatMap((write) => [write.key, write.before, write.after]),
        })) as number[];
        const retry = new Set(changed.map((position) => Number(position) - 1));
        writes.forEach((write, i) => {
          if (!retry.has(i)) result.set(write.key, write.value);
        });
        pending = pending.filter((_, i) => retry.has(i));
      }
      return result;
    },
    async list() {
      const keys = await client.sMembers(names);
      const found = new Map<string, SharedBucket>();
      for (let i = 0; i < keys.length; i += 500) {
        const chunk = keys.slice(i, i + 500);
        const values = await client.mGet(chunk.map(bucketKey));
        const expired: string[] = [];
        chunk.forEach((key, j) => {
          const bucket = parse(values[j]);
          if (bucket) found.set(key, bucket);
          else expired.push(key);
        });
        // Expired values leave their names behind: tidy them away.
        if (expired.length > 0) await client.sRem(names, expired);
      }
      return found;
    },
  };
  return {
    round: roundInSteps(steps),
    update: steps.update,
    async leave(gateway) {
      await client.zRem(gateways, gateway);
    },
    async close() {
      await client.quit().catch(() => {});
    },
  };
}

/** The shared buckets in this process's memory: for tests of several limiters together. */
export function memoryBuckets(): SharedBucketStore & { buckets: Map<string, SharedBucket> } {
  const buckets = new Map<string, SharedBucket>();
  const seen = new Map<string, number>();
  const copy = (bucket: SharedBucket | null | undefined) =>
    bucket ? (JSON.parse(JSON.stringify(bucket)) as SharedBucket) : null;
  const steps: RoundSteps = {
    async heartbeat(gateway, now, liveMs) {
      seen.set(gateway, Math.max(now, seen.get(gateway) ?? now));
      return [...seen].filter(([, at]) => at >= now - liveMs).map(([id]) => id);
    },
    async update(keys, change: BucketChange) {
      const result = new Map<string, SharedBucket | null>();
      for (const key of keys) {
        const next = change(key, copy(buckets.get(key)));
        if (next) buckets.set(key, copy(next) as SharedBucket);
        else buckets.delete(key);
        result.set(key, copy(next));
      }
      return result;
    },
    async list() {
      return new Map([...buckets].map(([key, bucket]) => [key, copy(bucket) as SharedBucket]));
    },
  };
  return {
    buckets,
    round: roundInSteps(steps),
    update: steps.update,
    async leave(gateway) {
      seen.delete(gateway);
    },
    close: async () => {},
  };
}
