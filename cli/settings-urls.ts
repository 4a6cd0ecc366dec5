import { isPostgresUrl, parsePostgresUrl } from "../shared/db/postgres.ts";
import { queueKind } from "../shared/queue/open/index.ts";

/** What GANTRY_DATABASE_URL must look like, when no sharper reason can be given. */
const DATABASE_URL_FORM =
  "must be postgres://user@host/db (optionally ?schema=name) or a SQLite file path";

/** Checked at start-up, so a typo stops the program before it opens anything. */
export function validDatabaseUrl(url: string): boolean {
  return databaseUrlProblem(url) === null;
}

export function validQueueUrl(url: string): boolean {
  return succeeds(() => queueKind(url)) && (!isPostgresUrl(url) || validDatabaseUrl(url));
}

/**
 * Why a GANTRY_DATABASE_URL is refused: the Postgres URL parser's own reason when it has
 * one (a schema name it cannot take, a bad `prepare`), so the line says what to change.
 */
export function databaseUrlError(input: unknown): string {
  return databaseUrlProblem(String(input)) ?? DATABASE_URL_FORM;
}

function databaseUrlProblem(url: string): string | null {
  if (isPostgresUrl(url)) {
    try {
      parsePostgresUrl(url);
      return null;
    } catch (error) {
      // The setting's name leads the line already: not "database URL:" after it.
      const why = error instanceof Error ? error.message : String(error);
      return why.replace(/^database URL:\s*/, "");
    }
  }
  const sqlite = !/^[a-z][a-z0-9+.-]+:\/\//i.test(url) || /^(sqlite|file):/i.test(url);
  return sqlite ? null : DATABASE_URL_FORM;
}

function succeeds(check: () => unknown): boolean {
  try {
    check();
    return true;
  } catch {
    return false;
  }
}
