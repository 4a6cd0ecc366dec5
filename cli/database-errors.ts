import { databaseFailure, isPostgresUrl, parsePostgresUrl } from "../shared/db/postgres.ts";
import { UserError } from "../shared/errors.ts";

/**
 * A database a command could not open (the gateway at start, `gantry keys`, `gantry
 * agents`), as one line naming the URL (without its password) and what to fix, rather than
 * a pg stack under "internal error". Null for anything else, which stays internal.
 */
export function databaseRefusal(url: string | undefined, error: unknown): UserError | null {
  if (!url || !isPostgresUrl(url)) return null;
  const why = databaseFailure(error);
  if (!why) return null;
  const { description } = parsePostgresUrl(url);
  return new UserError(
    `cannot use the database at ${description}: ${why}; check GANTRY_DATABASE_URL`,
  );
}
