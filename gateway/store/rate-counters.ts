import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import {
  FORGET_GATEWAY_MS,
  type SharedBucket,
  type SharedBucketStore,
} from "../limits/shared-bucket.ts";

/**
 * The shared buckets in Postgres: two UNLOGGED tables (the buckets are disposable: a crash
 * that loses them forgets a few seconds of spending, which only lets a burst through), made
 * here rather than by a migration because only gateways that share limits through Postgres
 * use them. A round is three statements for every tenant together: the heartbeat, one
 * transaction that locks the round's buckets in key order (so two gateways' rounds never
 * deadlock), and the listing.
 */
export async function postgresBuckets(db: Kysely<Database>): Promise<SharedBucketStore> {
  await sql`CREATE UNLOGGED TABLE IF NOT EXISTS gantry_rate_buckets (
    key text PRIMARY KEY, bucket jsonb)`.execute(db);
  await sql`CREATE UNLOGGED TABLE IF NOT EXISTS gantry_rate_gateways (
    id text PRIMARY KEY, seen_at bigint NOT NULL)`.execute(db);
  return {
    async heartbeat(gateway, now, liveMs) {
      await sql`DELETE FROM gantry_rate_gateways WHERE seen_at < ${now - FORGET_GATEWAY_MS}`.execute(
        db,
      );
      const result = await sql<{ id: string }>`
        WITH seen AS (
          INSERT INTO gantry_rate_gateways (id, seen_at) VALUES (${gateway}, ${now})
          ON CONFLICT (id) DO UPDATE SET seen_at = GREATEST(gantry_rate_gateways.seen_at, EXCLUDED.seen_at)
          RETURNING id)
        SELECT id FROM gantry_rate_gateways WHERE seen_at >= ${now - liveMs}
        UNION SELECT id FROM seen`.execute(db);
      return result.rows.map((row) => row.id);
    },
    async leave(gateway) {
      await sql`DELETE FROM gantry_rate_gateways WHERE id = ${gateway}`.execute(db);
    },
    async update(keys, change) {
      const sorted = [...new Set(keys)].sort();
      if (sorted.length === 0) return new Map();
      return db.transaction().execute(async (trx) => {
        // Inserts a row for each new key and locks every row, in key order.
        const locked = await sql<{ key: string; bucket: SharedBucket | null }>`
          INSERT INTO gantry_rate_buckets AS b (key, bucket)
          SELECT key, NULL FROM unnest(${sorted}::text[]) AS key ORDER BY key
          ON CONFLICT (key) DO UPDATE SET bucket = b.bucket
          RETURNING key, bucket`.execute(trx);
        const stored = new Map(locked.rows.map((row) => [row.key, row.bucket]));
        const next = new Map<string, SharedBucket | null>();
        for (const key of sorted) next.set(key, change(key, stored.get(key) ?? null));
        const kept = [...next].filter(([, bucket]) => bucket !== null);
        const gone = [...next].filter(([, bucket]) => bucket === null).map(([key]) => key);
        if (kept.length > 0) {
          await sql`
            UPDATE gantry_rate_buckets AS b SET bucket = v.bucket::jsonb
            FROM unnest(${kept.map(([key]) => key)}::text[],
                        ${kept.map(([, bucket]) => JSON.stringify(bucket))}::text[]) AS v(key, bucket)
            WHERE b.key = v.key`.execute(trx);
        }
        if (gone.length > 0) {
          await sql`DELETE FROM gantry_rate_buckets WHERE key = ANY(${gone}::text[])`.execute(trx);
        }
        return next;
      });
    },
    async list() {
      const result = await sql<{ key: string; bucket: SharedBucket }>`
        SELECT key, bucket FROM gantry_rate_buckets WHERE bucket IS NOT NULL`.execute(db);
      return new Map(result.rows.map((row) => [row.key, row.bucket]));
    },
    close: async () => {},
  };
}
