import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import type { JobStatus } from "../../shared/protocol/index.ts";
import { boundList } from "./bound-list.ts";
import { isPostgresDb, metadataMatches } from "./job-metadata.ts";
import type { JobEventRow, JobRow } from "./job-rows.ts";

/**
 * The JobStore's reads of jobs and their events: one plain function per statement, none of
 * which changes anything. KyselyJobStore (job-store.ts) binds them to its database.
 */

type Db = Kysely<Database>;

export interface JobListOptions {
  limit: number;
  /** A job id: only older jobs (ids sort by creation time). */
  before?: string;
  status?: JobStatus;
  model?: string;
  /** `metadata.KEY=VALUE` filters, all of which must match (job-metadata.ts). */
  metadata?: readonly (readonly [string, string])[];
}

export function byId(db: Db, id: string): Promise<JobRow | undefined> {
  return db.selectFrom("jobs").selectAll().where("id", "=", id).executeTakeFirst();
}

/** A tenant's job; another tenant's job is simply not found. */
export function forTenant(db: Db, tenantId: string, id: string): Promise<JobRow | undefined> {
  return db
    .selectFrom("jobs")
    .selectAll()
    .where("id", "=", id)
    .where("tenant_id", "=", tenantId)
    .executeTakeFirst();
}

export function byIdempotencyKey(
  db: Db,
  tenantId: string,
  key: string,
): Promise<JobRow | undefined> {
  return db
    .selectFrom("jobs")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("idempotency_key", "=", key)
    .executeTakeFirst();
}

/** The jobs a tenant made under any of `keys`, by key: one statement (`boundList`). */
export async function byIdempotencyKeys(
  db: Db,
  tenantId: string,
  keys: readonly string[],
): Promise<Map<string, JobRow>> {
  if (keys.length === 0) return new Map();
  const { rows } = await sql<JobRow>`SELECT * FROM jobs WHERE tenant_id = ${tenantId}
    AND idempotency_key IS NOT NULL AND idempotency_key ${boundList(db, keys)}`.execute(db);
  return new Map(rows.map((row) => [row.idempotency_key ?? "", row]));
}

/**
 * When each of `ids`' current life began (its last `queued` event at attempt 0: its submit
 * or its last retry), by id: one statement. A retry keeps a life as long as that one.
 */
export async function lifeBegins(db: Db, ids: readonly string[]): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const { rows } = await sql<{ job_id: string; at: number | string }>`
    SELECT job_id, MAX(at) AS at FROM job_events
    WHERE job_id ${boundList(db, ids)} AND status = 'queued' AND attempt = 0
    GROUP BY job_id`.execute(db);
  return new Map(rows.map((row) => [row.job_id, Number(row.at)]));
}

/** Newest first; ids sort by creation time, so the last id is the cursor. */
export function list(db: Db, tenantId: string, options: JobListOptions) {
  let query = db
    .selectFrom("jobs")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .orderBy("id", "desc")
    .limit(options.limit);
  if (options.before) query = query.where("id", "<", options.before);
  if (options.status) query = query.where("status", "=", options.status);
  if (options.model) query = query.where("model", "=", options.model);
  const filters = options.metadata ?? [];
  if (filters.length) {
    query = query.where((eb) => metadataMatches(eb, isPostgresDb(db), filters));
  }
  return query.execute();
}

export function eventsAfter(db: Db, jobId: string, afterSeq: number): Promise<JobEventRow[]> {
  return db
    .selectFrom("job_events")
    .selectAll()
    .where("job_id", "=", jobId)
    .where("seq", ">", afterSeq)
    .orderBy("seq")
    .execute();
}

/**
 * Released jobs whose message was never confirmed by the queue, released before
 * `olderThan`: the outbox. Held jobs (not released) are the releaser's, not the outbox's.
 */
export function unpublished(
  db: Db,
  olderThan: number,
  limit: number,
  exceptModels: readonly string[] = [],
) {
  let query = db
    .selectFrom("jobs")
    .selectAll()
    .where("status", "=", "queued")
    .where("published_at", "is", null)
    .where("released_at", "is not", null)
    .where("released_at", "<", olderThan);
  // Paused models' jobs wait unpublished until the resume: not the outbox's to publish.
  if (exceptModels.length) query = query.where("model", "not in", [...exceptModels]);
  return query.limit(limit).execute();
}

/** Queued jobs whose message the queue confirmed before `publishedBefore`, in id order. */
export function publishedQueued(
  db: Db,
  publishedBefore: number,
  afterId: string | null,
  limit: number,
) {
  let query = db
    .selectFrom("jobs")
    .selectAll()
    .where("status", "=", "queued")
    .where("published_at", "<", publishedBefore);
  if (afterId !== null) query = query.where("id", ">", afterId);
  return query.orderBy("id").limit(limit).execute();
}

export function overdueQueued(db: Db, now: number, limit: number): Promise<JobRow[]> {
  return db
    .selectFrom("jobs")
    .selectAll()
    .where("status", "=", "queued")
    .where("expires_at", "<", now)
    .limit(limit)
    .execute();
}

/** Running jobs not heard from (claim, heartbeat) since `staleBefore`: their agent is gone. */
export function staleRunning(db: Db, staleBefore: number, limit: number): Promise<JobRow[]> {
  return db
    .selectFrom("jobs")
    .selectAll()
    .where("status", "=", "running")
    .where("updated_at", "<", staleBefore)
    .orderBy("updated_at")
    .limit(limit)
    .execute();
}

/** Retried queued jobs by `updated_at` (their index: migration 0030), as `staleRunning`. */
export function silentQueued(db: Db, before: number, limit: number): Promise<JobRow[]> {
  return db
    .selectFrom("jobs")
    .selectAll()
    .where("status", "=", "queued")
    .where("updated_at", "<", before)
    .where("attempt", ">", 0)
    .where("published_at", "<", before)
    .orderBy("updated_at")
    .limit(limit)
    .execute();
}

/**
 * How many of the job's attempts were spent: its claims, counted from its events rather
 * than read from `attempt`, which is the queue's delivery count and starts again on a
 * republished message. A claim a draining agent gave back unspent is left out (`spent`).
 */
export async function claims(db: Db, id: string): Promise<number> {
  const events = await db
    .selectFrom("job_events")
    .select(["status", "attempt", "error"])
    .where("job_id", "=", id)
    .where("status", "in", ["running", "queued"])
    // Since the job's last life began: a retry (POST …/retry) is the one queued event at
    // attempt 0 after the insert, and starts the count again.
    .where("seq", ">", (eb) =>
      eb
        .selectFrom("job_events as life")
        .select((e) => e.fn.coalesce(e.fn.max("life.seq"), e.lit(0)).as("since"))
        .where("life.job_id", "=", id)
        .where("life.status", "=", "queued")
        .where("life.attempt", "=", 0),
    )
    .orderBy("seq")
    .execute();
  return spent(events);
}

type ClaimEvent = Pick<JobEventRow, "status" | "attempt" | "error">;

/**
 * The claims (`running` events) that spent an attempt. A draining agent's claim of a job it
 * never ran is released (a `queued` event at the same attempt with no error: a failure or a
 * lost agent has one) and its message given back at the same delivery count (give_back), so
 * the next claim is at that attempt again; a message sent back with a retry is claimed at
 * the next. A released claim not yet followed by another counts: which way its message
 * went is not known yet (a retry at the last attempt dead-letters it), and at most that
 * one claim is counted that may have been given back.
 */
function spent(events: readonly ClaimEvent[]): number {
  return events.filter((event, at) => {
    if (event.status !== "running") return false;
    const after = events[at + 1];
    const released =
      after?.status === "queued" && after.attempt === event.attempt && after.error === null;
    if (!released) return true;
    const next = events.slice(at + 2).find((later) => later.status === "running");
    return !next || next.attempt !== event.attempt;
  }).length;
}
