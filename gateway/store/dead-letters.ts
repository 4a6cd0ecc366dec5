import { type Kysely, type SqlBool, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { isPostgresDb } from "./job-metadata.ts";
import type { JobRow } from "./job-rows.ts";

/** Which dead letters (failed jobs, every tenant) a listing or a redrive covers. */
export interface DeadLetterFilter {
  model?: string;
  /** The error's `code` (`timeout`, `invalid_params`, …). */
  code?: string;
  /** Failed at or after this instant (ms). */
  since?: number;
  /** A job id: only jobs after it, in id order (the cursor of a resumable pass). */
  after?: string;
  limit: number;
}

/**
 * Failed jobs in id order (oldest first, so a redrive pass resumes where it stopped). The
 * error code is read from the stored JSON: `json_extract` on SQLite and D1, `jsonb` on
 * Postgres. `status = 'failed'` narrows by index first.
 */
export function deadLetters(db: Kysely<Database>, filter: DeadLetterFilter): Promise<JobRow[]> {
  let query = db
    .selectFrom("jobs")
    .selectAll()
    .where("status", "=", "failed")
    .orderBy("id")
    .limit(filter.limit);
  if (filter.model) query = query.where("model", "=", filter.model);
  if (filter.since !== undefined) query = query.where("finished_at", ">=", filter.since);
  if (filter.after) query = query.where("id", ">", filter.after);
  const code = filter.code;
  if (code) {
    const postgres = isPostgresDb(db);
    query = query.where(() =>
      postgres
        ? sql<SqlBool>`(error::jsonb ->> 'code') = ${code}`
        : sql<SqlBool>`json_extract(error, '$.code') = ${code}`,
    );
  }
  return query.execute();
}
