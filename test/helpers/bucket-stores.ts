import type { SharedBucketStore } from "../../gateway/limits/shared-bucket.ts";
import { memoryBuckets, redisBuckets } from "../../gateway/limits/shared-counters.ts";
import { postgresBuckets } from "../../gateway/store/rate-counters.ts";
import type { OnStatement } from "../../shared/db/statement-log.ts";
import { randomToken } from "../../shared/ids.ts";
import { openTestDatabase } from "./test-gateway.ts";

export const REDIS_URL = "redis://127.0.0.1:6379";

/** Lower-case letters and digits, for names Redis keys and tenants share. */
export const unique = () =>
  randomToken(8)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, "x");

/**
 * Every store the shared rate limits run on, each opened fresh for a test file: memory, a
 * Postgres schema of its own (dropped on close), and Redis under a prefix of its own.
 */
export const BUCKET_STORES: { name: string; open: () => Promise<SharedBucketStore> }[] = [
  { name: "memory", open: async () => memoryBuckets() },
  { name: "Postgres", open: () => postgresBucketStore() },
  { name: "Redis", open: () => redisBucketStore() },
];

/**
 * The Redis store under a prefix of its own, whose keys go on close: the store leaves its
 * buckets for a day and its gateways' set for minutes (they outlive a gateway by design),
 * which on the shared Redis were a test run's leftovers.
 */
async function redisBucketStore(): Promise<SharedBucketStore> {
  const prefix = `gantry:test:${unique()}`;
  const store = await redisBuckets(REDIS_URL, prefix);
  return {
    ...store,
    async close() {
      await store.close();
      const { createClient } = await import("redis");
      const client = await createClient({ url: REDIS_URL }).connect();
      try {
        for await (const keys of client.scanIterator({ MATCH: `${prefix}:*`, COUNT: 100 })) {
          if (keys.length > 0) await client.del(keys);
        }
      } finally {
        client.destroy();
      }
    },
  };
}

/** The Postgres store on a schema of its own, dropped on close; `onStatement` hears its SQL. */
export async function postgresBucketStore(onStatement?: OnStatement): Promise<SharedBucketStore> {
  const database = await openTestDatabase("postgres", onStatement ? { onStatement } : {});
  const store = await postgresBuckets(database.db);
  return { ...store, close: () => database.close() };
}
