import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import SqliteDatabase from "better-sqlite3";
import { Kysely, SqliteDialect } from "kysely";
import { migrate } from "./migrations.ts";
import type { Database } from "./schema.ts";

/**
 * Opens (and migrates) the embedded SQLite database. WAL lets readers run beside the one
 * writer, and lets a separate agent process share the file; the busy timeout makes the
 * writer wait for a lock instead of failing.
 */
export async function openSqlite(path: string): Promise<Kysely<Database>> {
  if (path !== ":memory:") mkdirSync(dirname(path), { recursive: true });
  const database = new SqliteDatabase(path);
  database.pragma("journal_mode = WAL");
  database.pragma("synchronous = NORMAL");
  database.pragma("busy_timeout = 5000");
  database.pragma("foreign_keys = ON");
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  await migrate(db, "sqlite");
  return db;
}
