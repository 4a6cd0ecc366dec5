import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import type { SharedCounters } from "./shared-rate.ts";

/**
 * The shared counters in Postgres: one UNLOGGED table (the counts are disposable: a crash
 * that loses them forgets a few seconds of spending, which only lets a burst through), one
 * upsert per round for every bucket, keys in order so that two gateways' rounds lock rows
 * in the same order and never deadlock. Made here rather than by a migration because only
 * gateways that share limits through Postgres use it.
 */
export async function postgresCounters(db: Kysely<Database>): Promise<SharedCounters> {
  await sql`CREATE UNLOGGED TABLE IF NOT EXISTS gantry_rate_counters (
    key text PRIMARY KEY, spent bigint NOT NULL)`.execute(db);
  return {
    async add(deltas) {
      const keys = [...deltas.keys()].sort();
      const rows = sql.join(keys.map((key) => sql`(${key}, ${deltas.get(key) ?? 0})`));
      const result = await sql<{ key: string; spent: string | number }>`
        INSERT INTO gantry_rate_counters AS c (key, spent) VALUES ${rows}
        ON CONFLICT (key) DO UPDATE SET spent = c.spent + EXCLUDED.spent
        RETURNING key, spent`.execute(db);
      return new Map(result.rows.map((row) => [row.key, Number(row.spent)]));
    },
    close: async () => {},
  };
}

/** The shared counters in Redis: INCRBY per bucket in one pipeline, kept a day after use. */
export async function redisCounters(url: string): Promise<SharedCounters> {
  const { createClient } = await import("redis");
  const client = createClient({ url });
  client.on("error", () => {
    // Reported by the failing round (SharedRateSync's onError); the client reconnects.
  });
  await client.connect();
  return {
    async add(deltas) {
      const multi = client.multi();
      const keys = [...deltas.keys()];
      for (const key of keys) {
        multi.incrBy(`gantry:rate:${key}`, deltas.get(key) ?? 0);
        multi.expire(`gantry:rate:${key}`, 86_400);
      }
      const replies = await multi.exec();
      return new Map(keys.map((key, i) => [key, Number(replies[i * 2])]));
    },
    async close() {
      await client.quit().catch(() => {});
    },
  };
}
