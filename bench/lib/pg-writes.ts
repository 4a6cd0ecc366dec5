import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";

/**
 * What a run wrote to Postgres, read from the statistics views: rows inserted, updated
 * (and how many of those were HOT, touching no index) and deleted per table of the stack's
 * own schema, exact whatever else the server is doing; and commits and WAL records of the
 * whole database and server, which only mean something on a quiet box. pg_stat_statements
 * would count statements too, but it needs `shared_preload_libraries`, which a bench cannot
 * set on a shared server.
 */
export interface WriteCounts {
  tables: Map<string, { inserted: number; updated: number; hot: number; deleted: number }>;
  commits: number;
  walRecords: number;
}

/**
 * Other sessions flush their counters when idle, at most once a second, and an idle
 * session that could not flush then does so within ten (PG 15's PGSTAT_IDLE_INTERVAL):
 * reading sooner after a run would miss its last writes.
 */
const FLUSH_WAIT_MS = 11_000;

export async function writeCounts(
  db: Kysely<Database>,
  say: (line: string) => void,
): Promise<WriteCounts> {
  say(`waiting ${FLUSH_WAIT_MS / 1000} s for Postgres to publish its write counters…`);
  await new Promise((resolve) => setTimeout(resolve, FLUSH_WAIT_MS));
  const rows = await sql<{
    relname: string;
    ins: string;
    upd: string;
    hot: string;
    del: string;
  }>`SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, n_tup_del AS del
     FROM pg_stat_user_tables WHERE schemaname = current_schema()`.execute(db);
  const totals = await sql<{ commits: string; wal: string }>`
    SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits,
           (SELECT wal_records FROM pg_stat_wal) AS wal`.execute(db);
  const tables: WriteCounts["tables"] = new Map();
  for (const row of rows.rows) {
    tables.set(row.relname, {
      inserted: Number(row.ins),
      updated: Number(row.upd),
      hot: Number(row.hot),
      deleted: Number(row.del),
    });
  }
  return {
    tables,
    commits: Number(totals.rows[0]?.commits ?? 0),
    walRecords: Number(totals.rows[0]?.wal ?? 0),
  };
}

/** Per-job writes between two readings, one line per table that was written, most first. */
export function writesPerJob(before: WriteCounts, after: WriteCounts, jobs: number): string[] {
  const perJob = (value: number) => (value / jobs).toFixed(2);
  const lines: { total: number; line: string }[] = [];
  let rows = 0;
  for (const [table, now] of after.tables) {
    const was = before.tables.get(table) ?? { inserted: 0, updated: 0, hot: 0, deleted: 0 };
    const inserted = now.inserted - was.inserted;
    const updated = now.updated - was.updated;
    const hot = now.hot - was.hot;
    const deleted = now.deleted - was.deleted;
    const total = inserted + updated + deleted;
    if (total === 0) continue;
    rows += total;
    lines.push({
      total,
      line:
        `  ${table.padEnd(22)} ${perJob(inserted)} inserted, ${perJob(updated)} updated ` +
        `(${perJob(hot)} HOT), ${perJob(deleted)} deleted`,
    });
  }
  lines.sort((a, b) => b.total - a.total);
  return [
    `rows written per job: ${perJob(rows)} (over ${jobs} jobs); commits per job ` +
      `${perJob(after.commits - before.commits)} and WAL records per job ` +
      `${perJob(after.walRecords - before.walRecords)} (whole server: a quiet box only)`,
    ...lines.map((entry) => entry.line),
  ];
}
