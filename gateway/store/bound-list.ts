import { type Kysely, type RawBuilder, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { isPostgresDb } from "./job-metadata.ts";

/**
 * `IN` a list of strings as one bound parameter whatever its length, for the end of a
 * condition (`id ${boundList(db, ids)}`): a JSON array read by `json_each` on SQLite and D1,
 * where a statement binds at most 100 parameters and a Worker invocation may make at most
 * 1 000 D1 queries (https://developers.cloudflare.com/d1/platform/limits/), so a list split
 * into statements of 99 would cost one statement per 99 items; a text array on Postgres.
 */
export function boundList(db: Kysely<Database>, values: readonly string[]): RawBuilder<unknown> {
  return isPostgresDb(db)
    ? sql`= ANY(${[...values]}::text[])`
    : sql`IN (SELECT value FROM json_each(${JSON.stringify(values)}))`;
}
