import { type Kysely, sql } from "kysely";
import { limitClause } from "../../shared/db/inline-limits.ts";
import type { Database } from "../../shared/db/schema.ts";
import { chunked, scopeCondition } from "./retention-jobs.ts";
import type { RetentionScope } from "./retention-leases.ts";

/** No job row is left of the batch: retention or a purge deleted them all. */
const EMPTY = sql<boolean>`NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.batch_id = batches.id)`;

/**
 * Batches that ended before `endedBefore` and have no job left: a batch's counts are read
 * from its jobs, so once retention (or a tenant's purge) has deleted them, all that stayed
 * was its metadata and webhook URL, answering `total: 2` with every count 0, for ever. A batch
 * in progress is kept whatever its age: its jobs still run, or a keyed request that died
 * half-way may be carried on. Read oldest end first from `batches_ended` (migration 0031).
 * No blobs, so no lease: its `batch.completed` delivery goes apart (retention-webhooks.ts).
 */
export async function deleteEmptyBatches(
  db: Kysely<Database>,
  scope: RetentionScope,
  endedBefore: number,
  limit: number,
): Promise<number> {
  const due = await sql<{ id: string }>`
    SELECT id FROM batches
    WHERE ${scopeCondition(scope, "tenant_id")}
      AND completed_at < ${endedBefore} AND status <> 'in_progress'
      AND ${EMPTY}
    ORDER BY completed_at ${limitClause(limit)}`.execute(db);
  let deleted = 0;
  for (const part of chunked(due.rows.map((row) => row.id))) {
    const result = await db
      .deleteFrom("batches")
      .where("id", "in", part)
      .where(EMPTY)
      .executeTakeFirst();
    deleted += Number(result.numDeletedRows);
  }
  return deleted;
}
