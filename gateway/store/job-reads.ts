import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import { type DeadLetterFilter, deadLetters } from "./dead-letters.ts";
import { jobCountsByStatus, queuedJobCount } from "./job-counts.ts";
import { isPostgresDb, metadataMatches } from "./job-metadata.ts";
import type { JobEventRow, JobRow } from "./job-rows.ts";
import { countQueued, type QueuedRange, queueCheckpoints, recentStarts } from "./job-standing.ts";
import type { JobListOptions } from "./ports.ts";

/**
 * The JobStore's reads on Kysely: single statements, no state change. KyselyJobStore
 * (job-store.ts) extends it with the changes.
 */
export class KyselyJobReads {
  constructor(protected readonly db: Kysely<Database>) {}

  byId(id: string): Promise<JobRow | undefined> {
    return this.db.selectFrom("jobs").selectAll().where("id", "=", id).executeTakeFirst();
  }

  /** A tenant's job; another tenant's job is simply not found. */
  forTenant(tenantId: string, id: string): Promise<JobRow | undefined> {
    return this.db
      .selectFrom("jobs")
      .selectAll()
      .where("id", "=", id)
      .where("tenant_id", "=", tenantId)
      .executeTakeFirst();
  }

  byIdempotencyKey(tenantId: string, key: string): Promise<JobRow | undefined> {
    return this.db
      .selectFrom("jobs")
      .selectAll()
      .where("tenant_id", "=", tenantId)
      .where("idempotency_key", "=", key)
      .executeTakeFirst();
  }

  /** Newest first; ids sort by creation time, so the last id is the cursor. */
  list(tenantId: string, options: JobListOptions) {
    let query = this.db
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
      query = query.where((eb) => metadataMatches(eb, isPostgresDb(this.db), filters));
    }
    return query.execute();
  }

  queuedCount(tenantId: string): Promise<number> {
    return queuedJobCount(this.db, tenantId);
  }

  countsByStatus(): Promise<Map<string, number>> {
    return jobCountsByStatus(this.db);
  }

  eventsAfter(jobId: string, afterSeq: number): Promise<JobEventRow[]> {
    return this.db
      .selectFrom("job_events")
      .selectAll()
      .where("job_id", "=", jobId)
      .where("seq", ">", afterSeq)
      .orderBy("seq")
      .execute();
  }

  /** Queued jobs whose message was never confirmed by the queue: the outbox. */
  unpublished(olderThan: number, limit: number, exceptModels: readonly string[] = []) {
    let query = this.db
      .selectFrom("jobs")
      .selectAll()
      .where("status", "=", "queued")
      .where("published_at", "is", null)
      .where("created_at", "<", olderThan);
    // Paused models' jobs wait unpublished until the resume: not the outbox's to publish.
    if (exceptModels.length) query = query.where("model", "not in", [...exceptModels]);
    return query.limit(limit).execute();
  }

  /** Queued jobs whose message the queue confirmed before `publishedBefore`, in id order. */
  publishedQueued(publishedBefore: number, afterId: string | null, limit: number) {
    let query = this.db
      .selectFrom("jobs")
      .selectAll()
      .where("status", "=", "queued")
      .where("published_at", "<", publishedBefore);
    if (afterId !== null) query = query.where("id", ">", afterId);
    return query.orderBy("id").limit(limit).execute();
  }

  overdueQueued(now: number, limit: number): Promise<JobRow[]> {
    return this.db
      .selectFrom("jobs")
      .selectAll()
      .where("status", "=", "queued")
      .where("expires_at", "<", now)
      .limit(limit)
      .execute();
  }

  /** Running jobs not heard from (claim, heartbeat) since `staleBefore`: their agent is gone. */
  staleRunning(staleBefore: number, limit: number): Promise<JobRow[]> {
    return this.db
      .selectFrom("jobs")
      .selectAll()
      .where("status", "=", "running")
      .where("updated_at", "<", staleBefore)
      .orderBy("updated_at")
      .limit(limit)
      .execute();
  }

  /** By the (status, updated_at) index, as `staleRunning`. */
  silentQueued(before: number, limit: number): Promise<JobRow[]> {
    return this.db
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

  deadLetters(filter: DeadLetterFilter): Promise<JobRow[]> {
    return deadLetters(this.db, filter);
  }

  countQueued(model: string, range: QueuedRange, limit: number): Promise<number> {
    return countQueued(this.db, model, range, limit);
  }

  queueCheckpoints(model: string, every: number) {
    return queueCheckpoints(this.db, model, every);
  }

  recentStarts(model: string, since: number, limit: number) {
    return recentStarts(this.db, model, since, limit);
  }

  /**
   * How many times the job was claimed. Counted from its events rather than read from
   * `attempt`, which is the queue's delivery count and starts again on a republished message.
   */
  async claims(id: string): Promise<number> {
    const row = await this.db
      .selectFrom("job_events")
      .select((eb) => eb.fn.countAll<number | string>().as("claims"))
      .where("job_id", "=", id)
      .where("status", "=", "running")
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
      .executeTakeFirst();
    return Number(row?.claims ?? 0);
  }
}
