import type { JobError, JobStatus } from "../../shared/protocol/index.ts";
import type { BatchRow, NewBatch } from "./batches.ts";
import type { DeadLetterFilter } from "./dead-letters.ts";
import type { ClaimItem, SuccessItem } from "./job-batch-updates.ts";
import type { NewJob } from "./job-inserts.ts";
import type { JobEventRow, JobRow } from "./job-rows.ts";
import type { QueuedRange } from "./job-standing.ts";
import type { ModelSwitchRow } from "./model-switches.ts";

/** The JobStore port: see ports.ts for what the store ports are and how they are kept. */

/** What a state change did: the job after it, or why it could not happen. */
export type Transition = { ok: true; job: JobRow } | { ok: false; current: JobRow | null };

export interface JobListOptions {
  limit: number;
  /** A job id: only older jobs (ids sort by creation time). */
  before?: string;
  status?: JobStatus;
  model?: string;
  /** `metadata.KEY=VALUE` filters, all of which must match (job-metadata.ts). */
  metadata?: readonly (readonly [string, string])[];
}

/** Jobs and their event log. A state change bumps `last_seq` and appends its event. */
export interface JobStore {
  /** Inserts a job; returns null when the tenant already used this Idempotency-Key. */
  insert(job: NewJob): Promise<JobRow | null>;
  byId(id: string): Promise<JobRow | undefined>;
  /** A tenant's job; another tenant's job is simply not found. */
  forTenant(tenantId: string, id: string): Promise<JobRow | undefined>;
  byIdempotencyKey(tenantId: string, key: string): Promise<JobRow | undefined>;
  /** Newest first. */
  list(tenantId: string, options: JobListOptions): Promise<JobRow[]>;
  eventsAfter(jobId: string, afterSeq: number): Promise<JobEventRow[]>;
  /** How many of a tenant's jobs wait in the queue: what `max_queued_jobs` bounds. */
  queuedCount(tenantId: string): Promise<number>;
  /** Jobs per status, every tenant together (the metrics). Statuses with none are absent. */
  countsByStatus(): Promise<Map<string, number>>;

  /** Stamps the job's message as confirmed by the queue; may be batched with others. */
  markPublished(id: string, now: number): Promise<void>;
  /** Queued jobs created before `olderThan` whose message was never confirmed: the outbox. */
  unpublished(
    olderThan: number,
    limit: number,
    exceptModels?: readonly string[],
  ): Promise<JobRow[]>;
  overdueQueued(now: number, limit: number): Promise<JobRow[]>;
  /** Queued jobs published before `publishedBefore`, in id order after `afterId` (sweep-lost.ts). */
  publishedQueued(
    publishedBefore: number,
    afterId: string | null,
    limit: number,
  ): Promise<JobRow[]>;
  /** Running jobs not heard from (claim, heartbeat) since `staleBefore`. */
  staleRunning(staleBefore: number, limit: number): Promise<JobRow[]>;
  /**
   * Queued jobs claimed before (a retry) that neither changed nor were published since
   * `before`, longest silent first: their message may be dead-lettered (sweep-dead.ts).
   */
  silentQueued(before: number, limit: number): Promise<JobRow[]>;
  /** How many times the job was claimed, counted from its events. */
  claims(id: string): Promise<number>;
  /** Models paused by the operator, and their switches (model-switches.ts). */
  pausedModels(): Promise<ModelSwitchRow[]>;
  pauseModel(
    model: string,
    options: { rejectNew: boolean; reason: string | null },
    now: number,
  ): Promise<ModelSwitchRow>;
  /** False when the model was not paused. */
  resumeModel(model: string, now: number): Promise<boolean>;
  /** A queued job's message is gone (a refused claim): the outbox is to publish it again. */
  markUnpublished(id: string): Promise<void>;
  /** Queued job ids of a model, in id order after `after`. */
  queuedIds(
    model: string,
    after: string | null,
    limit: number,
  ): Promise<{ id: string; tenant_id: string }[]>;
  modelJobCounts(model: string): Promise<{ queued: number; running: number }>;
  /** Marks every queued job of the model unpublished (its resume: model-switches.ts). */
  unpublishModel(model: string): Promise<void>;
  /** A model's queued jobs with no message (refused while it was paused), at most `limit`. */
  unpublishedOfModel(model: string, limit: number): Promise<JobRow[]>;
  /** Batches (batches.ts): their rows, and their jobs read by `batch_id`. */
  /** Undefined when the tenant already has a batch under the same `Idempotency-Key`. */
  insertBatch(batch: NewBatch): Promise<BatchRow | undefined>;
  batchByIdempotencyKey(tenantId: string, key: string): Promise<BatchRow | undefined>;
  sealBatch(id: string, total: number, now: number): Promise<void>;
  batchForTenant(tenantId: string, id: string): Promise<BatchRow | undefined>;
  batchJobCounts(id: string): Promise<Map<string, number>>;
  completeBatch(id: string, now: number): Promise<BatchRow | undefined>;
  markBatchCanceled(id: string, now: number): Promise<void>;
  batchJobs(
    id: string,
    options: { limit: number; after?: string; active?: boolean },
  ): Promise<JobRow[]>;
  /** Failed jobs of every tenant, in id order, matching the filter (dead-letters.ts). */
  deadLetters(filter: DeadLetterFilter): Promise<JobRow[]>;
  /** Queued jobs of a model in one band range, counting at most `limit` (job-standing.ts). */
  countQueued(model: string, range: QueuedRange, limit: number): Promise<number>;
  /** Every `every`-th queued job of a model in line order, with its rank. */
  queueCheckpoints(
    model: string,
    every: number,
  ): Promise<{ id: string; priority: number; rank: number }[]>;
  /** A model's jobs started since `since`, newest first, at most `limit`, with their waits. */
  recentStarts(
    model: string,
    since: number,
    limit: number,
  ): Promise<{ started_at: number; queue_ms: number }[]>;

  /**
   * A stale running job back to `queued` (unpublished) when `retry`, else `failed`; only if
   * still silent since `staleBefore` and still on the attempt judged stale.
   */
  reclaimStale(
    row: JobRow,
    staleBefore: number,
    error: JobError,
    retry: boolean,
    now: number,
  ): Promise<Transition>;
  /** A queued job whose message is gone for good to `failed`, if unchanged since `row`. */
  failQueued(row: JobRow, error: JobError, now: number): Promise<Transition>;
  /** A queued or running job of this tenant to `canceled`. */
  cancel(tenantId: string, id: string, now: number): Promise<Transition>;
  /**
   * A failed, expired or canceled job of this tenant back to `queued` under the same id:
   * attempts start again, the result and error are cleared, its events stay.
   */
  retry(tenantId: string, id: string, now: number, expiresAt: number): Promise<Transition>;
  /** A queued job past its deadline to `expired`. */
  expire(id: string, now: number): Promise<Transition>;
  /**
   * An agent takes the job for delivery `attempt`: a queued job not expired, or a running
   * one on an earlier attempt; of one of `models` when they are given.
   */
  claim(
    id: string,
    agentId: string,
    attempt: number,
    now: number,
    models?: readonly string[],
  ): Promise<Transition>;
  /** `claim` for many jobs at once; returns only the jobs claimed. */
  claimMany(
    items: readonly ClaimItem[],
    claim: { agentId: string; now: number; models: readonly string[] },
  ): Promise<JobRow[]>;
  /** `succeed` for many jobs at once; returns only the jobs that succeeded. */
  succeedMany(
    items: readonly SuccessItem[],
    report: { agentId: string; now: number },
  ): Promise<JobRow[]>;
  /**
   * Keeps a running attempt alive, storing its latest progress when given (JSON, see
   * job-progress.ts); undefined when it is not the running attempt.
   */
  heartbeat(
    id: string,
    attempt: number,
    now: number,
    progress?: string,
  ): Promise<JobRow | undefined>;
  /** Each of these settles the running attempt `attempt` (held by `agentId` when named). */
  succeed(
    id: string,
    attempt: number,
    output: unknown,
    now: number,
    agentId?: string,
  ): Promise<Transition>;
  /** Back to `queued` when the queue will retry it, else `failed`. */
  fail(
    id: string,
    attempt: number,
    error: JobError,
    willRetry: boolean,
    now: number,
    agentId?: string,
  ): Promise<Transition>;
  release(id: string, attempt: number, now: number, agentId?: string): Promise<Transition>;
}
