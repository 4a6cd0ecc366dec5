import { sql } from "kysely";
import type { Migration } from "./types.ts";

/**
 * Where a job stands, read by index rather than by scanning the jobs table.
 *
 * - `jobs_queue_position`: queued jobs per model in the order agents take them (priority,
 *   then age; ids sort by creation time). A job's `queue_position` is two index range
 *   counts over it. Partial, so it holds only what waits, not every job ever run.
 * - `jobs_model_started`: a model's recent starts, for its throughput (a queued job's
 *   `estimated_start_at`) and its p50/p95 wait.
 */
export const jobStanding: Migration = {
  name: "0009_job_standing",
  async up(db) {
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_queue_position ON jobs (model, priority, id)
      WHERE status = 'queued'`.execute(db);
    await db.schema
      .createIndex("jobs_model_started")
      .ifNotExists()
      .on("jobs")
      .columns(["model", "started_at"])
      .execute();
  },
};
