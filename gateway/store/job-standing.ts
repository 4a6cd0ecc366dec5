import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";

/**
 * How many queued jobs of the job's model an agent would take before it: higher priority
 * first, then older (ids sort by creation time). Two range counts on the partial index
 * `jobs_queue_position` (migration 0009), written apart so that each is one index range
 * rather than an OR the planner might filter row by row.
 */
export async function queuedAhead(
  db: Kysely<Database>,
  job: { id: string; model: string; priority: number },
): Promise<number> {
  const queued = db
    .selectFrom("jobs")
    .select((eb) => eb.fn.countAll<number | string>().as("n"))
    .where("status", "=", "queued")
    .where("model", "=", job.model);
  const [higher, older] = await Promise.all([
    queued.where("priority", ">", job.priority).executeTakeFirst(),
    queued.where("priority", "=", job.priority).where("id", "<", job.id).executeTakeFirst(),
  ]);
  return Number(higher?.n ?? 0) + Number(older?.n ?? 0);
}

/** A model's jobs started since `since`, newest first, at most `limit`: their waits. */
export async function recentStarts(
  db: Kysely<Database>,
  model: string,
  since: number,
  limit: number,
): Promise<{ started_at: number; queue_ms: number }[]> {
  const rows = await db
    .selectFrom("jobs")
    .select(["started_at", "created_at"])
    .where("model", "=", model)
    .where("started_at", ">=", since)
    .orderBy("started_at", "desc")
    .limit(limit)
    .execute();
  return rows.map((row) => ({
    started_at: Number(row.started_at),
    queue_ms: Number(row.started_at) - Number(row.created_at),
  }));
}
