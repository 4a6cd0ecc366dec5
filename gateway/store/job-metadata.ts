import {
  type Expression,
  type ExpressionBuilder,
  PostgresAdapter,
  type SqlBool,
  sql,
} from "kysely";
import type { Database } from "../../shared/db/schema.ts";

/** At most this many `metadata.KEY=VALUE` filters on one listing. */
export const MAX_METADATA_FILTERS = 4;

/**
 * `metadata ->> key = value` for each filter, in the dialect at hand: SQLite and D1 have
 * `json_extract`, Postgres `jsonb`. Keys are bound parameters (and validated as
 * `A-Za-z0-9_.-`), never spliced into the statement.
 */
export function metadataMatches(
  eb: ExpressionBuilder<Database, "jobs">,
  postgres: boolean,
  filters: readonly (readonly [string, string])[],
): Expression<SqlBool> {
  return eb.and(
    filters.map(([key, value]) =>
      postgres
        ? sql<SqlBool>`(metadata::jsonb ->> ${key}) = ${value}`
        : sql<SqlBool>`json_extract(metadata, ${`$."${key}"`}) = ${value}`,
    ),
  );
}

export const isPostgresDb = (db: { getExecutor(): { adapter: unknown } }): boolean =>
  db.getExecutor().adapter instanceof PostgresAdapter;
