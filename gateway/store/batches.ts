import { type Kysely, type Selectable, sql } from "kysely";
import type { BatchTable, Database } from "../../shared/db/schema.ts";
import { boundList } from "./bound-list.ts";
import type { JobRow } from "./job-rows.ts";

export type BatchRow = Selectable<BatchTable>;

export interface NewBatch {
  id: string;
  tenantId: string;
  model: string;
  webhook: { url: string } | null;
  metadata: Record<string, string> | null;
  now: number;
  /** The request's `Idempotency-Key` and the hash of its body, or null without a key. */
  idempotencyKey: string | null;
  requestHash: string | null;
}

/** The new batch, or undefined when the tenant already has one under the same key. */
export async function insertBatch(
  db: Kysely<Database>,
  batch: NewBatch,
): Promise<BatchRow | undefined> {
  return db
    .insertInto("batches")
    .values({
      id: batch.id,
      tenant_id: batch.tenantId,
      model: batch.model,
      status: "in_progress",
      total: null,
      webhook: batch.webhook ? JSON.stringify(batch.webhook) : null,
      metadata: batch.metadata ? JSON.stringify(batch.metadata) : null,
      created_at: batch.now,
      updated_at: batch.now,
      completed_at: null,
      canceled_at: null,
      idempotency_key: batch.idempotencyKey,
      request_hash: batch.requestHash,
    })
    .onConflict((oc) => oc.columns(["tenant_id", "idempotency_key"]).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export function batchByIdempotencyKey(db: Kysely<Database>, tenantId: string, key: string) {
  return db
    .selectFrom("batches")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("idempotency_key", "=", key)
    .executeTakeFirst();
}

/** Every item is in: the batch may now complete. */
export async function sealBatch(db: Kysely<Database>, id: string, total: number, now: number) {
  await db.updateTable("batches").set({ total, updated_at: now }).where("id", "=", id).execute();
}

export function batchForTenant(db: Kysely<Database>, tenantId: string, id: string) {
  return db
    .selectFrom("batches")
    .selectAll()
    .where("id", "=", id)
    .where("tenant_id", "=", tenantId)
    .executeTakeFirst();
}

/** Its jobs per status, read from the jobs themselves (`jobs_batch`). */
export async function batchJobCounts(
  db: Kysely<Database>,
  id: string,
): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom("jobs")
    .select(["status", (eb) => eb.fn.countAll<number | string>().as("n")])
    .where("batch_id", "=", id)
    .groupBy("status")
    .execute();
  return new Map(rows.map((row) => [row.status, Number(row.n)]));
}

/**
 * A sealed batch in progress becomes `completed` (or `canceled`, after a cancel). One
 * conditional UPDATE: of the gateways that see the last job finish, one wins and sends the
 * webhook. Undefined when it was not in progress or not sealed.
 */
export function completeBatch(db: Kysely<Database>, id: string, now: number) {
  return db
    .updateTable("batches")
    .set((eb) => ({
      status: eb
        .case()
        .when("canceled_at", "is not", null)
        .then("canceled")
        .else("completed")
        .end(),
      completed_at: now,
      updated_at: now,
    }))
    .where("id", "=", id)
    .where("status", "=", "in_progress")
    .where("total", "is not", null)
    .returningAll()
    .executeTakeFirst();
}

/**
 * A job of an ended batch is back in the queue (`POST /v1/jobs/{id}/retry`): the batch is in
 * progress again until that job ends, and then completes as before (its one `batch.completed`
 * delivery is not sent twice).
 */
export async function reopenBatch(db: Kysely<Database>, id: string, now: number) {
  await db
    .updateTable("batches")
    .set({ status: "in_progress", completed_at: null, updated_at: now })
    .where("id", "=", id)
    .where("status", "<>", "in_progress")
    .execute();
}

/** `reopenBatch` for many batches (a redrive's), in one statement. */
export async function reopenBatches(db: Kysely<Database>, ids: readonly string[], now: number) {
  if (ids.length === 0) return;
  await db
    .updateTable("batches")
    .set({ status: "in_progress", completed_at: null, updated_at: now })
    .where(sql<boolean>`id ${boundList(db, ids)}`)
    .where("status", "<>", "in_progress")
    .execute();
}

/** A batch still in progress is being canceled; a completed one stays as it ended. */
export async function markBatchCanceled(db: Kysely<Database>, id: string, now: number) {
  await db
    .updateTable("batches")
    .set({ canceled_at: now, updated_at: now })
    .where("id", "=", id)
    .where("status", "=", "in_progress")
    .where("canceled_at", "is", null)
    .execute();
}

/** Its jobs in id order (submission order), after `after`. */
export function batchJobs(
  db: Kysely<Database>,
  id: string,
  options: { limit: number; after?: string; active?: boolean },
): Promise<JobRow[]> {
  let query = db
    .selectFrom("jobs")
    .selectAll()
    .where("batch_id", "=", id)
    .orderBy("id")
    .limit(options.limit);
  if (options.after) query = query.where("id", ">", options.after);
  if (options.active) query = query.where("status", "in", ["queued", "running"]);
  return query.execute();
}
