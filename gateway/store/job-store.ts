import type { Kysely, UpdateQueryBuilder, UpdateResult } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import type { JobError, JobStatus } from "../../shared/protocol/index.ts";
import type { NewBatch } from "./batches.ts";
import * as batches from "./batches.ts";
import {
  type ClaimItem,
  claimMany,
  publishedMarker,
  type SuccessItem,
  succeedMany,
} from "./job-batch-updates.ts";
import { jobInserter, type NewJob } from "./job-inserts.ts";
import { heartbeat } from "./job-progress.ts";
import { KyselyJobReads } from "./job-reads.ts";
import type { JobRow } from "./job-rows.ts";
import * as switches from "./model-switches.ts";
import type { JobStore, Transition } from "./ports.ts";

export type { NewJob } from "./job-inserts.ts";

type JobUpdate = UpdateQueryBuilder<Database, "jobs", "jobs", UpdateResult>;

const ACTIVE: JobStatus[] = ["queued", "running"];
/** What `POST /v1/jobs/{id}/retry` may put back in the queue. */
export const RETRYABLE: JobStatus[] = ["failed", "expired", "canceled"];

/** The running attempt `attempt`, held by `agentId` when one is named. */
function currentAttempt(query: JobUpdate, attempt: number, agentId?: string): JobUpdate {
  const running = query.where("status", "=", "running").where("attempt", "=", attempt);
  return agentId === undefined ? running : running.where("agent_id", "=", agentId);
}

/**
 * The JobStore port (ports.ts) on Kysely (SQLite, Postgres, D1): jobs and their event log;
 * this file makes the changes, job-reads.ts holds the reads.
 *
 * Every state change is one conditional UPDATE … RETURNING that also bumps `last_seq`; a
 * database trigger appends its event in the same statement (migration 0005). No interactive
 * transactions, because D1 has none; the condition in the UPDATE is what keeps concurrent
 * agents and clients from racing.
 */
export class KyselyJobStore extends KyselyJobReads implements JobStore {
  private readonly inserter: (job: NewJob) => Promise<JobRow | null>;
  private readonly marker: (id: string, now: number) => Promise<void>;

  /**
   * `maxParameters`: bound parameters one statement may carry, which sizes the batches of
   * concurrent inserts. The default suits D1 (100); SQLite and Postgres take thousands.
   */
  private readonly maxParameters: number;

  constructor(db: Kysely<Database>, options: { maxParameters?: number } = {}) {
    super(db);
    this.maxParameters = options.maxParameters ?? 100;
    this.inserter = jobInserter(db, this.maxParameters);
    this.marker = publishedMarker(db, this.maxParameters);
  }

  /** Inserts a job; returns null when the tenant already used this Idempotency-Key. */
  insert(job: NewJob): Promise<JobRow | null> {
    return this.inserter(job);
  }

  /** Batched with other marks (see `publishedMarker`); resolves once stored. */
  markPublished(id: string, now: number): Promise<void> {
    return this.marker(id, now);
  }

  insertBatch(batch: NewBatch) {
    return batches.insertBatch(this.db, batch);
  }
  batchByIdempotencyKey(tenantId: string, key: string) {
    return batches.batchByIdempotencyKey(this.db, tenantId, key);
  }

  sealBatch(id: string, total: number, now: number) {
    return batches.sealBatch(this.db, id, total, now);
  }

  batchForTenant(tenantId: string, id: string) {
    return batches.batchForTenant(this.db, tenantId, id);
  }

  batchJobCounts(id: string) {
    return batches.batchJobCounts(this.db, id);
  }

  completeBatch(id: string, now: number) {
    return batches.completeBatch(this.db, id, now);
  }

  markBatchCanceled(id: string, now: number) {
    return batches.markBatchCanceled(this.db, id, now);
  }

  batchJobs(id: string, options: { limit: number; after?: string; active?: boolean }) {
    return batches.batchJobs(this.db, id, options);
  }

  pausedModels() {
    return switches.pausedModels(this.db);
  }

  pauseModel(model: string, options: { rejectNew: boolean; reason: string | null }, now: number) {
    return switches.pauseModel(this.db, model, options, now);
  }

  resumeModel(model: string, now: number) {
    return switches.resumeModel(this.db, model, now);
  }

  markUnpublished(id: string) {
    return switches.markUnpublished(this.db, id);
  }

  queuedIds(model: string, after: string | null, limit: number) {
    return switches.queuedIds(this.db, model, after, limit);
  }

  modelJobCounts(model: string) {
    return switches.modelJobCounts(this.db, model);
  }

  unpublishModel(model: string) {
    return switches.unpublishModel(this.db, model);
  }

  unpublishedOfModel(model: string, limit: number) {
    return switches.unpublishedOfModel(this.db, model, limit);
  }

  /**
   * Takes a stale running job back: to `queued` (unpublished, so the outbox covers a failed
   * republish) when `retry`, else to `failed`. Only if no heartbeat came in since `staleBefore`
   * and the attempt is still the one judged stale: a racing heartbeat or claim wins.
   */
  reclaimStale(
    row: JobRow,
    staleBefore: number,
    error: JobError,
    retry: boolean,
    now: number,
  ): Promise<Transition> {
    const change = retry
      ? { status: "queued", error: JSON.stringify(error), published_at: null }
      : { status: "failed", error: JSON.stringify(error), finished_at: now };
    return this.transition(row.id, change, now, (q) =>
      q
        .where("status", "=", "running")
        .where("attempt", "=", row.attempt)
        .where("updated_at", "<", staleBefore),
    );
  }

  failQueued(row: JobRow, error: JobError, now: number): Promise<Transition> {
    const change = { status: "failed", error: JSON.stringify(error), finished_at: now };
    return this.transition(row.id, change, now, (q) =>
      q.where("status", "=", "queued").where("last_seq", "=", row.last_seq),
    );
  }

  retry(tenantId: string, id: string, now: number, expiresAt: number): Promise<Transition> {
    const fresh = {
      status: "queued",
      attempt: 0,
      agent_id: null,
      output: null,
      error: null,
      started_at: null,
      finished_at: null,
      published_at: null,
      expires_at: expiresAt,
      progress: null,
    };
    return this.transition(id, fresh, now, (q) =>
      q.where("tenant_id", "=", tenantId).where("status", "in", RETRYABLE),
    );
  }

  cancel(tenantId: string, id: string, now: number): Promise<Transition> {
    return this.transition(id, { status: "canceled", finished_at: now }, now, (q) =>
      q.where("tenant_id", "=", tenantId).where("status", "in", ACTIVE),
    );
  }

  expire(id: string, now: number): Promise<Transition> {
    return this.transition(id, { status: "expired", finished_at: now }, now, (q) =>
      q.where("status", "=", "queued").where("expires_at", "<", now),
    );
  }

  /**
   * An agent takes the job for delivery `attempt`. A queued job, or a running one whose
   * earlier attempt was lost (its agent died and the queue redelivered), can be claimed.
   */
  claim(
    id: string,
    agentId: string,
    attempt: number,
    now: number,
    models?: readonly string[],
  ): Promise<Transition> {
    return this.transition(
      id,
      { status: "running", attempt, agent_id: agentId, started_at: now, error: null },
      now,
      (q) => {
        const claimable = q
          .where("expires_at", ">=", now)
          .where((eb) =>
            eb.or([
              eb("status", "=", "queued"),
              eb.and([eb("status", "=", "running"), eb("attempt", "<", attempt)]),
            ]),
          );
        return models ? claimable.where("model", "in", [...models]) : claimable;
      },
    );
  }

  /** `claim` for many jobs in one statement; returns only the jobs claimed. */
  claimMany(
    items: readonly ClaimItem[],
    claim: { agentId: string; now: number; models: readonly string[] },
  ): Promise<JobRow[]> {
    return claimMany(this.db, this.maxParameters, items, claim);
  }

  /** `succeed` for many jobs in one statement; returns only the jobs that succeeded. */
  succeedMany(
    items: readonly SuccessItem[],
    report: { agentId: string; now: number },
  ): Promise<JobRow[]> {
    return succeedMany(this.db, this.maxParameters, items, report);
  }

  heartbeat(id: string, attempt: number, now: number, progress?: string) {
    return heartbeat(this.db, {
      id,
      attempt,
      now,
      ...(progress === undefined ? {} : { progress }),
    });
  }

  succeed(
    id: string,
    attempt: number,
    output: unknown,
    now: number,
    agentId?: string,
  ): Promise<Transition> {
    return this.transition(
      id,
      { status: "succeeded", output: JSON.stringify(output ?? null), finished_at: now },
      now,
      (q) => currentAttempt(q, attempt, agentId),
    );
  }

  /** A failed attempt: back to `queued` when the queue will retry it, else `failed`. */
  fail(
    id: string,
    attempt: number,
    error: JobError,
    willRetry: boolean,
    now: number,
    agentId?: string,
  ): Promise<Transition> {
    const change = willRetry
      ? { status: "queued", error: JSON.stringify(error) }
      : { status: "failed", error: JSON.stringify(error), finished_at: now };
    return this.transition(id, change, now, (q) => currentAttempt(q, attempt, agentId));
  }

  release(id: string, attempt: number, now: number, agentId?: string): Promise<Transition> {
    return this.transition(id, { status: "queued" }, now, (q) =>
      currentAttempt(q, attempt, agentId),
    );
  }

  private async transition(
    id: string,
    change: Partial<Omit<JobRow, "id" | "last_seq">>,
    now: number,
    condition: (query: JobUpdate) => JobUpdate,
  ): Promise<Transition> {
    const base = this.db
      .updateTable("jobs")
      .set((eb) => ({ ...change, updated_at: now, last_seq: eb("last_seq", "+", 1) }))
      .where("id", "=", id);
    const row = await condition(base).returningAll().executeTakeFirst();
    if (!row) return { ok: false, current: (await this.byId(id)) ?? null };
    return { ok: true, job: row };
  }
}
