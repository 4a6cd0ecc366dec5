import type { Kysely } from "kysely";
import { UserError, unusable } from "../errors.ts";
import { fsReason } from "../folders.ts";
import type { SqlDialect } from "./migrations.ts";
import { databaseFailure, isPostgresUrl, openPostgres, parsePostgresUrl } from "./postgres.ts";
import type { Database } from "./schema.ts";
import type { SessionSettings } from "./session-settings.ts";
import { openSqlite } from "./sqlite.ts";
import type { OnStatement } from "./statement-log.ts";

export interface OpenedDatabase {
  db: Kysely<Database>;
  dialect: SqlDialect;
  /** Where it lives, without credentials, for progress lines and logs. */
  description: string;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Postgres pool size per process. Default 10. */
  maxConnections?: number;
  /** Postgres: settings the pool's connections carry, changed while it runs. */
  settings?: SessionSettings;
  /** Told of every statement sent, migrations' included (statement-log.ts). */
  onStatement?: OnStatement;
  /** Postgres: how long the first connection may take (default 15 s). */
  connectTimeoutMs?: number;
  /**
   * The setting the URL came from (`GANTRY_DATABASE_URL`): a Postgres the operator must fix
   * (unreachable, login refused, no such database, too few rights) fails as a UserError
   * naming the URL without its password and this setting, rather than as pg's error. Left
   * out where a caller waits for a database that is down (an agent's `sql` queue).
   */
  setting?: string;
}

/**
 * Opens (and migrates) the database a `GANTRY_DATABASE_URL` names: `postgres://…` (with an
 * optional `?schema=`), or a SQLite file as a path, `sqlite:<path>` or `file:<path>`.
 */
export async function openDatabase(
  url: string,
  options: OpenDatabaseOptions = {},
): Promise<OpenedDatabase> {
  if (isPostgresUrl(url)) {
    const { description } = parsePostgresUrl(url);
    const db = await openPostgres(url, options).catch((error: unknown) => {
      const why = options.setting ? databaseFailure(error) : null;
      if (!options.setting || !why) throw error;
      throw unusable(options.setting, `the database at ${description}`, why);
    });
    return { db, dialect: "postgres", description, close: () => db.destroy() };
  }
  const path = sqlitePath(url);
  const db = await openSqlite(path, options.onStatement).catch((error: unknown) => {
    // A file the operator must fix (a folder in the way, no permission): one line.
    const code = (error as NodeJS.ErrnoException | null)?.code;
    if (!options.setting || typeof code !== "string" || code.startsWith("SQLITE_")) throw error;
    throw unusable(options.setting, `the database at sqlite:${path}`, fsReason(error));
  });
  return { db, dialect: "sqlite", description: `sqlite:${path}`, close: () => db.destroy() };
}

/** The file a SQLite URL names: `sqlite:<path>`, `sqlite://<path>`, `file:<path>` or a path. */
export function sqlitePath(url: string): string {
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(url)?.[1]?.toLowerCase();
  // A one-letter "scheme" is a Windows drive (C:\data\gantry.db), not a scheme.
  if (scheme === undefined || scheme.length === 1) return url;
  if (scheme !== "sqlite" && scheme !== "file") {
    throw new UserError(
      `database URL scheme "${scheme}:" is not supported; use postgres://… or a SQLite path`,
    );
  }
  const path = url.slice(scheme.length + 1).replace(/^\/\//, "");
  if (path === "") throw new UserError(`database URL ${JSON.stringify(url)} names no file`);
  return path;
}
