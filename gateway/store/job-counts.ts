import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";

/** Counts over `jobs`, for admission (a tenant's queued jobs) and the metrics. */

/** How many of a tenant's jobs wait in the queue: what `max_queued_jobs` bounds. */
export async function queuedJobCount(db: Kysely<Database>, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom("jobs")
    .select((eb) => eb.fn.countAll<string | number>().as("n"))
    .where("tenant_id", "=", tenantId)
    .where("status", "=", "queued")
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** Jobs per status, every tenant together. */
export async function jobCountsByStatus(db: Kysely<Database>): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom("jobs")
    .select(["status", (eb) => eb.fn.countAll<number | string | bigint>().as("count")])
    .groupBy("status")
    .execute();
  return new Map(rows.map((row) => [row.status, Number(row.count)]));
}
