import type { Kysely } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import type { JobError } from "../../shared/protocol/index.ts";
import type { NewBatch } from "./batches.ts";
import * as batches from "./batches.ts";
import { type DeadLetterFilter, deadLetters } from "./dead-letters.ts";
import {
  type ClaimItem,
  type ClaimOptions,
  claimMany,
  type SuccessItem,
  succeedMany,
} from "./job-batch-updates.ts";
import { jobCountsByStatus, queuedJobCount } from "./job-counts.ts";
import type { NewJob } from "./job-inserts.ts";
import { heartbeat } from "./job-progress.ts";
import type { JobListOptions } from "./job-reads.ts";
import * as reads from "./job-reads.ts";
import * as release from "./job-release.ts";
import type { JobRow } from "./job-rows.ts";
import type { QueuedBand, QueuedRange } from "./job-standing.ts";
import * as standing from "./job-standing.ts";
import type { ClaimScope } from "./job-transitions.ts";
import * as changes from "./job-transitions.ts";
import { type JobWrites, jobWrites } from "./job-writes.ts";
import * as switches from "./model-switches.ts";
import type { Chooser } from "./release-snapshot.ts";
import type { RunUsage } from "./usage.ts";

export type { NewJob } from "./job-inserts.ts";

/**
 * Jobs and their event log on Kysely (SQLite, Postgres, D1), as `Stores["jobs"]`: a state
 * change bumps `last_seq` and appends its event. It holds no SQL of its own: it binds its
 * database to plain query functions, one per statement, kept by concept (job-reads.ts,
 * job-transitions.ts, job-inserts.ts, batches.ts, …), the way graphile-worker keeps its
 * queries. Only the gathered writes hold state (job-writes.ts), so they are built once, here.
 */
export class KyselyJobStore {
  private readonly writes: JobWrites;
  /** One request's changes to many jobs, in statements that do not grow with them. */
  readonly bulk: JobWrites["bulk"];

  /**
   * `maxParameters`: bound parameters one statement may carry, which sizes the batches of
   * concurrent inserts. The default suits D1 (100); SQLite and Postgres take thousands.
   */
  private readonly maxParameters: number;

  constructor(
    private readonly db: Kysely<Database>,
    options: { maxParameters?: number; isolatedRequests?: boolean } = {},
  ) {
    this.maxParameters = options.maxParameters ?? 100;
    this.writes = jobWrites(db, this.maxParameters, options.isolatedRequests ?? false);
    this.bulk = this.writes.bulk;
  }

  /** Inserts a job; returns null when the tenant already used this Idempotency-Key. */
  insert(job: NewJob): Promise<JobRow | null> {
    return this.writes.insert(job);
  }

  /** Batched with other marks (see `publishedMarker`); resolves once stored. */
  markPublished(id: string, now: number): Promise<void> {
    return this.writes.markPublished(id, now);
  }

  byId(id: string) {
    return reads.byId(this.db, id);
  }
  /** A tenant's job; another tenant's job is simply not found. */
  forTenant(tenantId: string, id: string) {
    return reads.forTenant(this.db, tenantId, id);
  }
  byIdempotencyKey(tenantId: string, key: string) {
    return reads.byIdempotencyKey(this.db, tenantId, key);
  }
  /** Newest first. */
  list(tenantId: string, options: JobListOptions) {
    return reads.list(this.db, tenantId, options);
  }
  eventsAfter(jobId: string, afterSeq: number) {
    return reads.eventsAfter(this.db, jobId, afterSeq);
  }
  /** How many of a tenant's jobs wait in the queue: what `max_queued_jobs` bounds. */
  queuedCount(tenantId: string) {
    return queuedJobCount(this.db, tenantId);
  }
  /** Jobs per status, every tenant together (the metrics). Statuses with none are absent. */
  countsByStatus() {
    return jobCountsByStatus(this.db);
  }
  /** A release pass of `model` (job-release.ts): `choose`'s picks marked released, safely. */
  releaseJobs(model: string, window: number, choose: Chooser, now: number) {
    return release.releaseJobs(this.db, model, window, choose, now);
  }
  /** A tenant's jobs holding its `max_running_jobs` places, per model (release-line.ts). */
  activeByModel(tenantId: string) {
    return release.activeByModel(this.db, tenantId);
  }
  /** Models with jobs held for release, at most `limit`. */
  heldModels(limit: number) {
    return release.heldModels(this.db, limit);
  }
  /** Released jobs, released before `olderThan`, whose message was never confirmed: the outbox. */
  unpublished(olderThan: number, limit: number, exceptModels?: readonly string[]) {
    return reads.unpublished(this.db, olderThan, limit, exceptModels);
  }
  /** Queued jobs published before `publishedBefore`, in id order after `afterId` (sweep/lost.ts). */
  publishedQueued(publishedBefore: number, afterId: string | null, limit: number) {
    return reads.publishedQueued(this.db, publishedBefore, afterId, limit);
  }
  overdueQueued(now: number, limit: number) {
    return reads.overdueQueued(this.db, now, limit);
  }
  /** Running jobs not heard from (claim, heartbeat) since `staleBefore`. */
  staleRunning(staleBefore: number, limit: number) {
    return reads.staleRunning(this.db, staleBefore, limit);
  }
  /**
   * Queued jobs claimed before (a retry) that neither changed nor were published since
   * `before`, longest silent first: their message may be dead-lettered (sweep/dead.ts).
   */
  silentQueued(before: number, limit: number) {
    return reads.silentQueued(this.db, before, limit);
  }
  /** How many times the job was claimed, counted from its events. */
  claims(id: string) {
    return reads.claims(this.db, id);
  }
  /** Failed jobs of every tenant, in id order, matching the filter (dead-letters.ts). */
  deadLetters(filter: DeadLetterFilter) {
    return deadLetters(this.db, filter);
  }
  /** Queued jobs of a model in one band range, counting at most `limit` (job-standing.ts). */
  countQueued(model: string, range: QueuedRange, limit: number) {
    return standing.countQueued(this.db, model, range, limit);
  }
  /** A model's queued ids of one priority between two ids, in line order (job-standing.ts). */
  queuedIdsInBand(model: string, band: QueuedBand, limit: number) {
    return standing.queuedIdsInBand(this.db, model, band, limit);
  }
  /** Every `every`-th queued job of a model in line order, with its rank. */
  queueCheckpoints(model: string, every: number) {
    return standing.queueCheckpoints(this.db, model, every);
  }
  /** A model's jobs started since `since`, newest first, at most `limit`, with their waits. */
  recentStarts(model: string, since: number, limit: number) {
    return standing.recentStarts(this.db, model, since, limit);
  }

  /** Undefined when the tenant already has a batch under the same `Idempotency-Key`. */
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
  reopenBatch(id: string, now: number) {
    return batches.reopenBatch(this.db, id, now);
  }
  batchJobs(id: string, options: { limit: number; after?: string; active?: boolean }) {
    return batches.batchJobs(this.db, id, options);
  }

  /** Models paused by the operator, and their switches (model-switches.ts). */
  pausedModels() {
    return switches.pausedModels(this.db);
  }
  pauseModel(model: string, options: { rejectNew: boolean; reason: string | null }, now: number) {
    return switches.pauseModel(this.db, model, options, now);
  }
  /** False when the model was not paused. */
  resumeModel(model: string, now: number) {
    return switches.resumeModel(this.db, model, now);
  }
  /** A queued job's message is gone (a refused claim): the outbox is to publish it again. */
  markUnpublished(id: string) {
    return switches.markUnpublished(this.db, id);
  }
  /** Queued job ids of a model, in id order after `after`. */
  queuedIds(model: string, after: string | null, limit: number) {
    return switches.queuedIds(this.db, model, after, limit);
  }
  modelJobCounts(model: string) {
    return switches.modelJobCounts(this.db, model);
  }
  /** Holds the model's released jobs again (its resume: model-switches.ts). */
  holdModel(model: string) {
    return switches.holdModel(this.db, model);
  }

  /**
   * A stale running job back to `queued` (unpublished) when `retry`, else `failed`; only if
   * still silent since `staleBefore` and still on the attempt judged stale.
   */
  reclaimStale(row: JobRow, staleBefore: number, error: JobError, retry: boolean, now: number) {
    return changes.reclaimStale(this.db, row, staleBefore, error, retry, now);
  }
  /** A queued job whose message is gone for good to `failed`, if unchanged since `row`. */
  failQueued(row: JobRow, error: JobError, now: number) {
    return changes.failQueued(this.db, row, error, now);
  }
  /**
   * A failed, expired or canceled job of this tenant back to `queued` under the same id:
   * attempts start again, the result and error are cleared, its events stay. `held`: it
   * waits in the store for the fair release (job-release.ts) instead of being released.
   */
  retry(tenantId: string, id: string, now: number, expiresAt: number, held = false) {
    return changes.retry(this.db, tenantId, id, now, expiresAt, held);
  }
  /** A queued or running job of this tenant to `canceled`. */
  cancel(tenantId: string, id: string, now: number) {
    return changes.cancel(this.db, tenantId, id, now);
  }
  /** A queued job past its deadline to `expired`. */
  expire(id: string, now: number) {
    return changes.expire(this.db, id, now);
  }
  /**
   * An agent takes the job for delivery `attempt`: a queued job not expired, or a running
   * one on an earlier attempt (not heard from since `takeoverBefore`, when given); of one of
   * `models` when they are given.
   */
  claim(id: string, agentId: string, attempt: number, now: number, ...scope: ClaimScope) {
    return changes.claim(this.db, id, agentId, attempt, now, ...scope);
  }
  /** Each settles the running attempt (held by `agentId` if named); `run`: store/usage.ts. */
  succeed(
    id: string,
    attempt: number,
    output: unknown,
    now: number,
    agentId?: string,
    run?: RunUsage,
  ) {
    return changes.succeed(this.db, id, attempt, output, now, agentId, run);
  }
  /** Back to `queued` when the queue will retry it, else `failed`. */
  fail(
    id: string,
    attempt: number,
    error: JobError,
    willRetry: boolean,
    now: number,
    agentId?: string,
    run?: RunUsage,
  ) {
    return changes.fail(this.db, id, attempt, error, willRetry, now, agentId, run);
  }
  release(id: string, attempt: number, now: number, agentId?: string, run?: RunUsage) {
    return changes.release(this.db, id, attempt, now, agentId, run);
  }

  /** `claim` for many jobs in one statement; returns only the jobs claimed. */
  claimMany(items: readonly ClaimItem[], claim: ClaimOptions): Promise<JobRow[]> {
    return claimMany(this.db, this.maxParameters, items, claim);
  }

  /** `succeed` for many jobs in one statement; returns only the jobs that succeeded. */
  succeedMany(
    items: readonly SuccessItem[],
    report: { agentId: string; now: number },
  ): Promise<JobRow[]> {
    return succeedMany(this.db, this.maxParameters, items, report);
  }

  /**
   * Keeps a running attempt alive, storing its latest progress when given (JSON, see
   * job-progress.ts); undefined when it is not the running attempt.
   */
  heartbeat(id: string, attempt: number, now: number, progress?: string) {
    return heartbeat(this.db, {
      id,
      attempt,
      now,
      ...(progress === undefined ? {} : { progress }),
    });
  }
}
