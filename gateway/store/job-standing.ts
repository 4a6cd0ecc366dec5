import { type Kysely, sql } from "kysely";
import { limitClause } from "../../shared/db/inline-limits.ts";
import type { Database } from "../../shared/db/schema.ts";
import { heldInLane } from "./release-line.ts";

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

/** One band range of a model's queued jobs: a priority, and ids between two (exclusive). */
export type QueuedRange =
  | { priority: number; afterId?: string; beforeId?: string }
  | { priorityAbove: number; priorityBelow: number };

/** How many queued jobs of `model` fall in `range`, counting at most `limit` (an index range). */
export async function countQueued(
  db: Kysely<Database>,
  model: string,
  range: QueuedRange,
  limit: number,
): Promise<number> {
  let inner = db
    .selectFrom("jobs")
    .select(sql<number>`1`.as("one"))
    .where("status", "=", "queued")
    .where("model", "=", model);
  if ("priority" in range) {
    inner = inner.where("priority", "=", range.priority);
    if (range.afterId) inner = inner.where("id", ">", range.afterId);
    if (range.beforeId) inner = inner.where("id", "<", range.beforeId);
  } else {
    inner = inner
      .where("priority", ">", range.priorityAbove)
      .where("priority", "<", range.priorityBelow);
  }
  const row = await db
    .selectFrom(inner.limit(limit).as("bounded"))
    .select((eb) => eb.fn.countAll<number | string>().as("n"))
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** One priority's stretch of a model's line, from one id to another (both included). */
export type QueuedBand = { priority: number; fromId: string; toId: string };

/**
 * The ids of `model`'s queued jobs of one priority from `fromId` to `toId` (both included),
 * in line order, at most `limit`: one index range that places a whole listing page's jobs
 * of that band against each other (queue-position.ts).
 */
export async function queuedIdsInBand(
  db: Kysely<Database>,
  model: string,
  band: QueuedBand,
  limit: number,
): Promise<string[]> {
  const rows = await db
    .selectFrom("jobs")
    .select("id")
    .where("status", "=", "queued")
    .where("model", "=", model)
    .where("priority", "=", band.priority)
    .where("id", ">=", band.fromId)
    .where("id", "<=", band.toId)
    .orderBy("id")
    .limit(limit)
    .execute();
  return rows.map((row) => row.id);
}

/**
 * Every `every`-th queued job of `model` in the order agents take them (priority, then
 * age), with its rank: the checkpoints a job's place is counted from. One pass over the
 * partial index, shared by every reader for a second or two (queue-position.ts).
 */
export async function queueCheckpoints(
  db: Kysely<Database>,
  model: string,
  every: number,
): Promise<{ id: string; priority: number; rank: number }[]> {
  const { rows } = await sql<{ id: string; priority: number; rank: number | string }>`
    SELECT id, priority, rank FROM (
      SELECT id, priority, row_number() OVER (ORDER BY priority DESC, id) AS rank
      FROM jobs WHERE status = 'queued' AND model = ${model}
    ) line WHERE rank % ${every} = 0 ORDER BY rank`.execute(db);
  return rows.map((row) => ({
    id: row.id,
    priority: Number(row.priority),
    rank: Number(row.rank),
  }));
}

/** One lane of a model's held jobs (a band, a tenant and a `fairness_key`), up to an id. */
export type HeldLaneRange = {
  priority: number;
  tenantId: string;
  fairnessKey: string | null;
  /** From this id on (included); from the lane's oldest when absent. */
  fromId?: string;
  /** Up to this id (included). */
  toId: string;
};

/**
 * The ids of a lane's held jobs from `fromId` (or its oldest) to `toId`, in the order the
 * lane is released (its oldest first), at most `limit`: where a held job stands in its
 * lane, for its place in the fair order (queue-position.ts).
 */
export async function heldIdsInLane(
  db: Kysely<Database>,
  model: string,
  lane: HeldLaneRange,
  limit: number,
): Promise<string[]> {
  const from = lane.fromId === undefined ? sql`` : sql`AND id >= ${lane.fromId}`;
  const { rows } = await sql<{ id: string }>`
    SELECT id FROM jobs WHERE ${heldInLane(model, lane)} ${from} AND id <= ${lane.toId}
    ORDER BY id ${limitClause(limit)}`.execute(db);
  return rows.map((row) => row.id);
}
