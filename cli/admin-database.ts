import { existsSync } from "node:fs";
import { type OpenedDatabase, openDatabase, sqlitePath } from "../shared/db/open.ts";
import {
  databaseFailure,
  holdsGantryTables,
  isPostgresUrl,
  parsePostgresUrl,
} from "../shared/db/postgres.ts";
import { UserError, unusable } from "../shared/errors.ts";
import { readDatabaseUrl } from "./settings.ts";

/**
 * The gateway's database, for `gantry keys` and `gantry agents`, which write to it directly.
 * A SQLite file that is not there, or a Postgres schema without Gantry's tables, is refused,
 * not made: a mistyped data dir or `?schema=` (or a command run in the wrong folder) would
 * otherwise quietly make a new, empty database, and a key or an agent secret in it that no
 * gateway knows.
 */
export async function openAdminDatabase(
  env: Readonly<Record<string, string | undefined>>,
): Promise<OpenedDatabase> {
  const databaseUrl = readDatabaseUrl(env);
  if (!isPostgresUrl(databaseUrl) && !existsSync(sqlitePath(databaseUrl))) {
    throw new UserError(
      `no database at ${databaseUrl}: run "gantry start" once, or set GANTRY_DATA_DIR or GANTRY_DATABASE_URL`,
    );
  }
  // Likewise a Postgres schema (or database) no gateway has migrated: a mistyped `?schema=`
  // would otherwise be made on the spot and take a key no gateway knows.
  if (isPostgresUrl(databaseUrl)) {
    const { description } = parsePostgresUrl(databaseUrl);
    const held = await holdsGantryTables(databaseUrl).catch((error: unknown) => {
      const why = databaseFailure(error);
      if (!why) throw error;
      throw unusable("GANTRY_DATABASE_URL", `the database at ${description}`, why);
    });
    if (!held) {
      throw new UserError(
        `no Gantry database at ${description}: start a gateway on it once (gantry gateway or gantry start with this GANTRY_DATABASE_URL), or check GANTRY_DATABASE_URL and its ?schema=`,
      );
    }
  }
  return openDatabase(databaseUrl, { setting: "GANTRY_DATABASE_URL" });
}
