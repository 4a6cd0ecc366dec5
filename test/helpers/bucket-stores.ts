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
  { name: "Redis", open: () => redisBuckets(REDIS_URL, `gantry:test:${unique()}`) },
];

/** The Postgres store on a schema of its own, dropped on close; `onStatement` hears its SQL. */
export async function postgresBucketStore(onStatement?: OnStatement): Promise<SharedBucketStore> {
  const database = await openTestDatabase("postgres", onStatement ? { onStatement } : {});
  const store = await postgresBuckets(database.db);
  return { ...store, close: () => database.close() };
}
