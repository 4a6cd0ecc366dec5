import { sql } from "kysely";
import { insertJobsFunction } from "./0026-insert-released.ts";
import type { Migration } from "./types.ts";

/**
 * Fewer index entries per job (issue 29 #2). Every change of a job moves indexed columns, so
 * none is a HOT update on Postgres: each new version of the row gets an entry in every index
 * whose predicate it meets, five versions a job on its way from submit to end. Three
 * indexes held every version for nothing:
 *
 * - `jobs_tenant_idempotency` (unique) held every job, with or without a key; it now holds the
 *   jobs that have one (`jobs_tenant_idempotency_key`). The inserts name the predicate in
 *   their conflict target (job-inserts.ts, and `gantry_insert_jobs` here), which matches the
 *   old index as well as the new one.
 * - `jobs_model_started` held jobs that never started (three versions of five); it now holds
 *   the started ones (`jobs_model_started_at`), which are all its readers ask for
 *   (`started_at >= …`).
 * - `jobs_tenant_queued` counted a tenant's queued jobs, which `jobs_tenant_status`
 *   (tenant, status) counts as well.
 *
 * And `jobs_queue_position` (model, priority, id) becomes `jobs_queue_line` (model, priority
 * DESC, id), the order agents take a model's jobs in: the checkpoints of a line
 * (job-standing.ts) read it in that order, which the old index could not give (its priority
 * ascends with the ids), so every read sorted the whole line, on disk past a few thousand
 * jobs. Its range counts read either.
 *
 * Eleven entries fewer per job that runs once, without an Idempotency-Key. The new indexes are
 * built before the old ones go. A gateway older than this migration names no predicate in its
 * conflict target, which Postgres cannot match with a partial index: upgrade every gateway of
 * a deployment together (docs/deployment.md).
 */
export const leanJobIndexes: Migration = {
  name: "0027_lean_job_indexes",
  async up(db, dialect) {
    await sql`
      CREATE UNIQUE INDEX IF NOT EXISTS jobs_tenant_idempotency_key
      ON jobs (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_model_started_at ON jobs (model, started_at)
      WHERE started_at IS NOT NULL`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_queue_line ON jobs (model, priority DESC, id)
      WHERE status = 'queued'`.execute(db);
    if (dialect === "postgres") {
      await insertJobsFunction(
        sql`(tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL`,
      ).execute(db);
    }
    await sql`DROP INDEX IF EXISTS jobs_tenant_idempotency`.execute(db);
    await sql`DROP INDEX IF EXISTS jobs_model_started`.execute(db);
    await sql`DROP INDEX IF EXISTS jobs_tenant_queued`.execute(db);
    await sql`DROP INDEX IF EXISTS jobs_queue_position`.execute(db);
  },
};
