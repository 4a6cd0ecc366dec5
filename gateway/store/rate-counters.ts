import { type Kysely, sql, type Transaction } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import {
  type BucketChange,
  FORGET_GATEWAY_MS,
  type SharedBucket,
  type SharedBucketStore,
} from "../limits/shared-bucket.ts";

/** How often gateways gone for `FORGET_GATEWAY_MS` are deleted: a statement of its own. */
const FORGET_EVERY_MS = 60_000;

/** Inserts a row for each new key and locks every row, in key order; answers them all. */
const lockBuckets = (sorted: readonly string[]) => sql<{
  key: string;
  bucket: SharedBucket | null;
}>`
  INSERT INTO gantry_rate_buckets AS b (key, bucket)
  SELECT key, NULL FROM unnest(${sorted}::text[]) AS key ORDER BY key
  ON CONFLICT (key) DO UPDATE SET bucket = b.bucket
  RETURNING key, bucket`;

/** A row of a round's first statement: a gateway alive, or a bucket (`gateway` null). */
interface RoundRow {
  gateway: string | null;
  key: string | null;
  bucket: SharedBucket | null;
}

/**
 * The shared buckets in Postgres: two UNLOGGED tables (the buckets are disposable: a crash
 * that loses them forgets a few seconds of spending, which only lets a burst through), made
 * here rather than by a migration because only gateways that share limits through Postgres
 * use them.
 *
 * Every gateway runs a round every 200 ms while it serves some tenant and once a second
 * while it serves none (limits/round-timer.ts), so a round is as few statements as its work
 * allows: one while no tenant is served here (the heartbeat, the gateways alive and every
 * bucket, together), four while some are (in one transaction, the heartbeat with the locking
 * of the round's buckets in key order, so that two gateways' rounds never deadlock; then the
 * new values with the listing of the others). It was seven and three. Gateways gone for an
 * hour are deleted once a minute, outside any transaction: a DELETE that could meet another
 * gateway's in the same statement as the bucket locks could wait on it in either order.
 */
export async function postgresBuckets(db: Kysely<Database>): Promise<SharedBucketStore> {
  await sql`CREATE UNLOGGED TABLE IF NOT EXISTS gantry_rate_buckets (
    key text PRIMARY KEY, bucket jsonb)`.execute(db);
  await sql`CREATE UNLOGGED TABLE IF NOT EXISTS gantry_rate_gateways (
    id text PRIMARY KEY, seen_at bigint NOT NULL)`.execute(db);
  let forgotAt = Number.NEGATIVE_INFINITY;

  const update = async (
    trx: Transaction<Database>,
    sorted: readonly string[],
    stored: ReadonlyMap<string, SharedBucket | null>,
    change: BucketChange,
    list: boolean,
  ) => {
    const next = new Map<string, SharedBucket | null>();
    for (const key of sorted) next.set(key, change(key, stored.get(key) ?? null));
    const kept = [...next].filter(([, bucket]) => bucket !== null);
    const gone = [...next].filter(([, bucket]) => bucket === null).map(([key]) => key);
    // The listing sees the table as it was before the writes beside it: the round's own
    // keys are left out and taken from `next`.
    const { rows } = await sql<{ key: string; bucket: SharedBucket }>`
      WITH kept AS (
        UPDATE gantry_rate_buckets AS b SET bucket = v.bucket::jsonb
        FROM unnest(${kept.map(([key]) => key)}::text[],
                    ${kept.map(([, bucket]) => JSON.stringify(bucket))}::text[]) AS v(key, bucket)
        WHERE b.key = v.key RETURNING 1),
      gone AS (DELETE FROM gantry_rate_buckets WHERE key = ANY(${gone}::text[]) RETURNING 1)
      SELECT key, bucket FROM gantry_rate_buckets
      WHERE ${list}::boolean AND bucket IS NOT NULL AND key <> ALL(${sorted}::text[])`.execute(trx);
    const heard = list ? new Map(rows.map((row) => [row.key, row.bucket])) : null;
    for (const [key, bucket] of kept) heard?.set(key, bucket as SharedBucket);
    return { settled: next, heard };
  };

  return {
    async round({ gateway, now, liveMs, keys, change, list }) {
      if (now - forgotAt >= FORGET_EVERY_MS) {
        forgotAt = now;
        await sql`DELETE FROM gantry_rate_gateways WHERE seen_at < ${now - FORGET_GATEWAY_MS}`.execute(
          db,
        );
      }
      const sorted = [...new Set(keys)].sort();
      const seen = sql`seen AS (
        INSERT INTO gantry_rate_gateways (id, seen_at) VALUES (${gateway}, ${now})
        ON CONFLICT (id) DO UPDATE SET seen_at = GREATEST(gantry_rate_gateways.seen_at, EXCLUDED.seen_at)
        RETURNING id)`;
      const alive = sql`SELECT id AS gateway, NULL AS key, NULL::jsonb AS bucket
        FROM gantry_rate_gateways WHERE seen_at >= ${now - liveMs}
        UNION SELECT id, NULL, NULL FROM seen`;
      const split = (rows: RoundRow[]) => ({
        live: rows.flatMap((row) => (row.gateway === null ? [] : [row.gateway])),
        buckets: rows.filter((row): row is RoundRow & { key: string } => row.gateway === null),
      });
      if (sorted.length === 0) {
        const { rows } = await sql<RoundRow>`WITH ${seen} ${alive}
          UNION ALL SELECT NULL, key, bucket FROM gantry_rate_buckets
          WHERE ${list}::boolean AND bucket IS NOT NULL`.execute(db);
        const { live, buckets } = split(rows);
        const heard = new Map(buckets.map((row) => [row.key, row.bucket as SharedBucket]));
        return { live, settled: new Map(), heard: list ? heard : null };
      }
      return db.transaction().execute(async (trx) => {
        const { rows } = await sql<RoundRow>`WITH ${seen}, locked AS (${lockBuckets(sorted)})
          ${alive}
          UNION ALL SELECT NULL, key, bucket FROM locked`.execute(trx);
        const { live, buckets } = split(rows);
        const stored = new Map(buckets.map((row) => [row.key, row.bucket]));
        return { live, ...(await update(trx, sorted, stored, change(new Set(live)), list)) };
      });
    },
    async leave(gateway) {
      await sql`DELETE FROM gantry_rate_gateways WHERE id = ${gateway}`.execute(db);
    },
    async update(keys, change) {
      const sorted = [...new Set(keys)].sort();
      if (sorted.length === 0) return new Map();
      return db.transaction().execute(async (trx) => {
        const locked = await lockBuckets(sorted).execute(trx);
        const stored = new Map(locked.rows.map((row) => [row.key, row.bucket]));
        return (await update(trx, sorted, stored, change, false)).settled;
      });
    },
    close: async () => {},
  };
}
