import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { isPostgresDb } from "./job-metadata.ts";

/**
 * Keeps Postgres's statistics of the busy tables fresh, as autovacuum's analyze would: the
 * hot statements' plans depend on them, and a burst outruns it. With statistics taken
 * before a backlog arrived, Postgres believes no job is queued: the line a release pass reads
 * on every claim and end scanned every queued job through `jobs_queued_expires` and sorted
 * them (40 000 rows for a pass of 8, 35 ms, behind 20 000 held jobs), and the drain of a
 * 100 000-job backlog ran at 200 jobs/s where a near-empty queue ran at 770 (issue 29,
 * bench/backlog.ts). Servers run with autovacuum off, or tuned to wait for 10 % of a large
 * table to change, and there the gateway is the only one to notice.
 *
 * A table is analyzed when more rows changed since its last analyze (by autovacuum, an
 * operator or a gateway) than `MIN_CHANGED` plus `SHARE` of its rows, autovacuum's rule with
 * a higher floor, and this gateway has not analyzed it in the last `MIN_INTERVAL_MS`: a
 * steady flow of jobs churns a small table past the rule every sweep, and an analyze each
 * time cost Postgres 0.4 ms of CPU per job at 200 jobs/s. One gateway at a time (a try of a
 * transaction lock; the others pass). SQLite and D1 plan without such statistics.
 *
 * `job_events` is left to autovacuum: only appended to, and read through one index whatever
 * the statistics say.
 */
const TABLES = ["jobs", "queue_messages"] as const;
const MIN_CHANGED = 1_000;
const SHARE = 0.1;
const MIN_INTERVAL_MS = 60_000;
/** "gantry" + "stats": the analyze of one gateway at a time. */
const ANALYZE_LOCK = 0x67616e7472_5354;

interface TableActivity {
  relname: string;
  live: number | string;
  changed: number | string;
}

/**
 * Analyzes the tables that changed much since their last analyze; resolves with their names.
 * One per database handle: it remembers when it last analyzed each table.
 */
export function statisticsRefresher(
  db: Kysely<Database>,
  now: () => number = Date.now,
): () => Promise<string[]> {
  const analyzedAt = new Map<string, number>();
  return async () => {
    if (!isPostgresDb(db)) return [];
    // The counters lag the writes by a second or so (each backend flushes its own when idle).
    const { rows } = await sql<TableActivity>`
      SELECT relname, n_live_tup AS live, n_mod_since_analyze AS changed
      FROM pg_stat_user_tables
      WHERE schemaname = current_schema() AND relname IN (${sql.join([...TABLES])})`.execute(db);
    const due = rows
      .filter((row) => Number(row.changed) > MIN_CHANGED + SHARE * Number(row.live))
      .filter((row) => now() - (analyzedAt.get(row.relname) ?? -Infinity) >= MIN_INTERVAL_MS)
      .map((row) => row.relname);
    if (due.length === 0) return [];
    const analyzed = await db.transaction().execute(async (tx) => {
      const { rows: lock } = await sql<{ got: boolean }>`
        SELECT pg_try_advisory_xact_lock(${ANALYZE_LOCK}) AS got`.execute(tx);
      if (!lock[0]?.got) return [];
      for (const table of due) await sql`ANALYZE ${sql.table(table)}`.execute(tx);
      return due;
    });
    for (const table of analyzed) analyzedAt.set(table, now());
    return analyzed;
  };
}
