import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";

/**
 * The webhook outbox (migration 0011): every `running` or terminal change of a job with a
 * webhook, recorded by a trigger in the same statement as the change. Runtime-free.
 */
export interface OutboxEntry {
  jobId: string;
  seq: number;
  at: number;
  /** The event as its change left the job (from `job_events`). */
  status: string;
  attempt: number;
  error: string | null;
  /** Whether the event already has its delivery (the gateway's fast path recorded it). */
  recorded: boolean;
}

/** Entries older than `before`, oldest first, each with whether its delivery exists. */
export async function outboxDue(
  db: Kysely<Database>,
  before: number,
  limit: number,
): Promise<OutboxEntry[]> {
  const rows = await db
    .selectFrom("webhook_outbox as o")
    .innerJoin("job_events as e", (join) =>
      join.onRef("e.job_id", "=", "o.job_id").onRef("e.seq", "=", "o.seq"),
    )
    .leftJoin("webhook_deliveries as d", (join) =>
      join.onRef("d.job_id", "=", "o.job_id").onRef("d.event_seq", "=", "o.seq"),
    )
    .select(["o.job_id", "o.seq", "o.at", "e.status", "e.attempt", "e.error", "d.id as delivery"])
    .where("o.at", "<", before)
    .orderBy("o.at")
    .limit(limit)
    .execute();
  return rows.map((row) => ({
    jobId: row.job_id,
    seq: Number(row.seq),
    at: Number(row.at),
    status: row.status,
    attempt: Number(row.attempt),
    error: row.error,
    recorded: row.delivery !== null,
  }));
}

/** At most this many entries per statement: two parameters each, D1 takes 100. */
const CLEAR_CHUNK = 40;

/** Forgets entries whose delivery is recorded (or that needed none). */
export async function clearOutbox(
  db: Kysely<Database>,
  entries: readonly { jobId: string; seq: number }[],
): Promise<void> {
  for (let i = 0; i < entries.length; i += CLEAR_CHUNK) {
    const chunk = entries.slice(i, i + CLEAR_CHUNK);
    await db
      .deleteFrom("webhook_outbox")
      .where((eb) =>
        eb.or(
          chunk.map((entry) => eb.and([eb("job_id", "=", entry.jobId), eb("seq", "=", entry.seq)])),
        ),
      )
      .execute();
  }
}
