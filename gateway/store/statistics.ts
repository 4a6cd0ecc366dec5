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
/**
 * A vacuum's own floor: dead rows slow every scan of the line as they pile up, so they are
 * taken away sooner than statistics are refreshed (a 100 000-job drain averaged 823 jobs/s
 * with a vacuum a minute at most, 913 with one every 15 s, ending at 1 100).
 */
const VACUUM_INTERVAL_MS = 15_000;
/** "gantry" + "stats": the analyze of one gateway at a time. */
const ANALYZE_LOCK = 0x67616e7472_5354;
/** "gantry" + "VD" (vacuum, dead rows): the vacuum of one gateway at a time. */
const VACUUM_LOCK = 0x67616e7472_5644;

interface TableActivity {
  relname: string;
  live: number | string;
  changed: number | string;
  dead: number | string;
}

/**
 * The busy tables whose `count` of rows (changed since the last analyze, or dead) passed the
 * rule, and that this gateway has not seen to in the last `intervalMs`.
 */
async function dueTables(
  db: Kysely<Database>,
  count: (row: TableActivity) => number,
  doneAt: Map<string, number>,
  now: number,
  intervalMs: number,
): Promise<string[]> {
  // The counters lag the writes by a second or so (each backend flushes its own when idle).
  const { rows } = await sql<TableActivity>`
    SELECT relname, n_live_tup AS live, n_mod_since_analyze AS changed, n_dead_tup AS dead
    FROM pg_stat_user_tables
    WHERE schemaname = current_schema() AND relname IN (${sql.join([...TABLES])})`.execute(db);
  return rows
    .filter((row) => count(row) > MIN_CHANGED + SHARE * Number(row.live))
    .filter((row) => now - (doneAt.get(row.relname) ?? -Infinity) >= intervalMs)
    .map((row) => row.relname);
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
    const changed = (row: TableActivity) => Number(row.changed);
    const due = await dueTables(db, changed, analyzedAt, now(), MIN_INTERVAL_MS);
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

/**
 * Vacuums the tables whose dead rows passed the same rule; resolves with their names. Every
 * change of a job leaves its old row version dead, and until a vacuum takes them away each
 * index scan of the line steps over them: with autovacuum off, one agent's drain of 100 000
 * jobs fell from 1 000 jobs/s to 600 as they piled up, and with this vacuum it did not fall
 * (913 jobs/s on average, ending at 1 105; bench/backlog.ts). Autovacuum's default waits for
 * a fifth of a table to die, which on a large jobs table is far later than this.
 * `SKIP_LOCKED`: a table autovacuum (or another gateway) is vacuuming is passed over, never
 * waited for. A vacuum cannot run inside a transaction, so the one-gateway-at-a-time lock is
 * a session lock on one connection.
 */
export function deadRowVacuum(
  db: Kysely<Database>,
  now: () => number = Date.now,
): () => Promise<string[]> {
  const vacuumedAt = new Map<string, number>();
  return async () => {
    if (!isPostgresDb(db)) return [];
    const dead = (row: TableActivity) => Number(row.dead);
    const due = await dueTables(db, dead, vacuumedAt, now(), VACUUM_INTERVAL_MS);
    if (due.length === 0) return [];
    // Counted as tried even if it fails (a statement_timeout, a lock): tried again after the
    // interval, not on every sweep.
    for (const table of due) vacuumedAt.set(table, now());
    return db.connection().execute(async (conn) => {
      const { rows: lock } = await sql<{ got: boolean }>`
        SELECT pg_try_advisory_lock(${VACUUM_LOCK}) AS got`.execute(conn);
      if (!lock[0]?.got) return [];
      try {
        for (const table of due) await sql`VACUUM (SKIP_LOCKED) ${sql.table(table)}`.execute(conn);
        return due;
      } finally {
        await sql`SELECT pg_advisory_unlock(${VACUUM_LOCK})`.execute(conn);
      }
    });
  };
}
