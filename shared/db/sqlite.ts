import { dirname } from "node:path";
import SqliteDatabase from "better-sqlite3";
import { Kysely, type SqliteDatabase as KyselySqlite } from "kysely";
import { makeFolderSync } from "../folders.ts";
import { createPrivateFile, PRIVATE_DIR_MODE } from "../private-files.ts";
import { InlineLimitsSqliteDialect } from "./inline-limits.ts";
import { migrate } from "./migrations.ts";
import type { Database } from "./schema.ts";
import { type OnStatement, statementLog } from "./statement-log.ts";

/**
 * Opens (and migrates) the embedded SQLite database. WAL lets readers run beside the one
 * writer, and lets a separate agent process share the file; the busy timeout makes the
 * writer wait for a lock instead of failing.
 *
 * A new database file is made mode 0600 (whatever the umask) before SQLite opens it, and
 * SQLite gives the `-wal` and `-shm` files the database's mode: it holds agent and webhook
 * secrets. A folder made for it is 0700.
 */
export async function openSqlite(
  path: string,
  onStatement?: OnStatement,
): Promise<Kysely<Database>> {
  if (path !== ":memory:") {
    makeFolderSync(dirname(path), PRIVATE_DIR_MODE);
    createPrivateFile(path);
  }
  const database = new SqliteDatabase(path);
  database.pragma("journal_mode = WAL");
  database.pragma("synchronous = NORMAL");
  database.pragma("busy_timeout = 5000");
  database.pragma("foreign_keys = ON");
  const db = new Kysely<Database>({
    // Its LIMITs in the text: bound, SQLite would compile those statements on every run.
    dialect: new InlineLimitsSqliteDialect({ database: withStatementCache(database) }),
    ...statementLog(onStatement),
  });
  await migrate(db, "sqlite");
  return db;
}

/**
 * Distinct SQL texts kept prepared; past this one seldom used goes. Each holds its compiled
 * program in SQLite's memory (about 20 KiB for the queue's lease, 5 KiB for its read): the
 * limit's variants add some 10 to 25 MiB to a busy embedded gateway's peak.
 */
const MAX_STATEMENTS = 500;

interface Kept {
  statement: SqliteDatabase.Statement;
  /** Run since the cache last looked for one to drop (CLOCK, in `dropOne`). */
  used: boolean;
}

/**
 * better-sqlite3 with its prepared statements kept. Kysely prepares every query it runs,
 * and the hot paths (claims, leases, state changes) are a few dozen SQL texts whose
 * preparing costs as much as running them. Statements are re-prepared by SQLite itself
 * after a schema change, so a kept one never goes stale.
 *
 * A full cache drops one seldom used, never a hot one: a statement per limit
 * (inline-limits.ts) makes a few hundred texts that come and go (a claim of 1 to 200 jobs,
 * pages of 1 to 100). A hit only marks its statement used, no reordering on the hot path.
 */
export function withStatementCache(database: SqliteDatabase.Database): KyselySqlite {
  const statements = new Map<string, Kept>();
  return {
    close: () => database.close(),
    prepare(sql) {
      const kept = statements.get(sql);
      if (kept) {
        kept.used = true;
        return kept.statement;
      }
      const statement = database.prepare(sql);
      if (statements.size >= MAX_STATEMENTS) dropOne(statements);
      statements.set(sql, { statement, used: false });
      return statement;
    },
  };
}

/**
 * CLOCK: from the oldest, a statement used since the last pass goes to the back with its mark
 * cleared, and the first one not used goes. A Map iterates in insertion order, entries put
 * back included, so one pass always ends.
 */
function dropOne(statements: Map<string, Kept>): void {
  for (const [sql, kept] of statements) {
    statements.delete(sql);
    if (!kept.used) return;
    kept.used = false;
    statements.set(sql, kept);
  }
}
