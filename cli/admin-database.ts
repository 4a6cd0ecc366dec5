import { existsSync } from "node:fs";
import { type OpenedDatabase, openDatabase, sqlitePath } from "../shared/db/open.ts";
import { isPostgresUrl } from "../shared/db/postgres.ts";
import { UserError } from "../shared/errors.ts";
import { readDatabaseUrl } from "./settings.ts";

/**
 * The gateway's database, for `gantry keys` and `gantry agents`, which write to it directly.
 * A SQLite file that is not there is refused, not made: a mistyped data dir (or a command run
 * in the wrong folder) would otherwise quietly make a new, empty database, and a key or an
 * agent secret in it that no gateway knows.
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
  return openDatabase(databaseUrl, { setting: "GANTRY_DATABASE_URL" });
}
