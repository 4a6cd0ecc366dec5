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
    ...(row.started_at === null ? {} : { metrics: metricsOf(row, row.started_at) }),
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
