import type { Selectable } from "kysely";
import type { JobEventTable, JobTable } from "../../shared/db/schema.ts";
import type {
  Job,
  JobError,
  JobEvent,
  JobMetadata,
  JobMetrics,
  JobStatus,
  WebhookSubscription,
} from "../../shared/protocol/index.ts";
import { traceIdOf } from "../../shared/trace.ts";
import { progressOfRow } from "./job-progress.ts";

export type JobRow = Selectable<JobTable>;

/** Every column of `jobs`: what raw statements return, and the parameters a row takes. */
export const JOB_COLUMNS = [
  "id",
  "tenant_id",
  "model",
  "status",
  "priority",
  "input",
  "output",
  "error",
  "webhook",
  "attempt",
  "agent_id",
  "idempotency_key",
  "request_hash",
  "traceparent",
  "created_at",
  "updated_at",
  "started_at",
  "finished_at",
  "expires_at",
  "published_at",
  "last_seq",
  "metadata",
  "batch_id",
  "timeout_seconds",
  "timeout_default",
  "key_id",
  "gpu_ms",
  "wasted_gpu_ms",
  "billed_runs",
  "provider",
  "device",
  "fairness_key",
  "released_at",
  "load_ms",
] as const satisfies readonly (keyof JobTable)[];

export type JobEventRow = Selectable<JobEventTable>;

const iso = (ms: number) => new Date(ms).toISOString();
const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms));
const parseOrNull = <T>(text: string | null): T | null =>
  text === null ? null : (JSON.parse(text) as T);

/** The public job resource. Tenant ids, agent ids and idempotency hashes stay inside. */
export function toJob(row: JobRow): Job {
  return {
    id: row.id,
    object: "job",
    model: row.model,
    status: row.status as JobStatus,
    priority: row.priority,
    input: JSON.parse(row.input),
    output: parseOrNull(row.output),
    error: parseOrNull<JobError>(row.error),
    attempt: row.attempt,
    webhook: parseOrNull<WebhookSubscription>(row.webhook),
    created_at: iso(row.created_at),
    started_at: isoOrNull(row.started_at),
    finished_at: isoOrNull(row.finished_at),
    expires_at: iso(row.expires_at),
    ...(row.metadata === null ? {} : { metadata: JSON.parse(row.metadata) as JobMetadata }),
    ...(row.timeout_seconds === null ? {} : { timeout_seconds: row.timeout_seconds }),
    ...((row.fairness_key ?? null) === null ? {} : { fairness_key: row.fairness_key ?? "" }),
    ...(row.started_at === null ? {} : { metrics: metricsOf(row, row.started_at) }),
    ...(traceIdOf(row.traceparent) ? { trace_id: traceIdOf(row.traceparent) } : {}),
    ...(row.started_at === null ? {} : { progress: progressOfRow(row) }),
    ...expiredData(row),
  };
}

/**
 * What retention (gateway/retention/) deleted, said outright: a job whose output is gone
 * must not read like one that produced none. Raw batch statements return JOB_COLUMNS only,
 * without these columns; those rows are fresh jobs, never expired ones.
 */
function expiredData(
  row: JobRow,
): Pick<Job, "output_expired" | "input_expired" | "data_expired_at"> {
  const dataExpiredAt = row.data_expired_at ?? null;
  return {
    ...(dataExpiredAt === null
      ? {}
      : { output_expired: true as const, data_expired_at: iso(dataExpiredAt) }),
    ...((row.inputs_purged_at ?? null) === null ? {} : { input_expired: true as const }),
  };
}

/** Where a started job's time went; a retried job's queue time counts from its creation. */
function metricsOf(row: JobRow, startedAt: number): JobMetrics {
  const finished = row.status === "queued" || row.status === "running" ? null : row.finished_at;
  return {
    queue_ms: startedAt - row.created_at,
    run_ms: finished === null ? null : finished - startedAt,
    total_ms: finished === null ? null : finished - row.created_at,
    ...runUsageOf(row),
  };
}

/** What its runs used (migration 0022); rows read before it have none of these. */
function runUsageOf(
  row: JobRow,
): Pick<JobMetrics, "gpu_ms" | "wasted_gpu_ms" | "provider" | "device" | "load_ms"> {
  return {
    gpu_ms: Number(row.gpu_ms ?? 0),
    ...(Number(row.wasted_gpu_ms ?? 0) > 0 ? { wasted_gpu_ms: Number(row.wasted_gpu_ms) } : {}),
    ...(row.provider ? { provider: row.provider } : {}),
    ...(row.device ? { device: row.device } : {}),
    ...(row.load_ms ? { load_ms: Number(row.load_ms) } : {}),
  };
}

export function toJobEvent(row: JobEventRow): JobEvent {
  return {
    job_id: row.job_id,
    seq: row.seq,
    status: row.status as JobStatus,
    at: iso(row.at),
    attempt: row.attempt,
    error: parseOrNull<JobError>(row.error),
  };
}

/** What a state change did: the job after it, or why it could not happen. */
export type Transition = { ok: true; job: JobRow } | { ok: false; current: JobRow | null };
