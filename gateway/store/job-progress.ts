import { type Kysely, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import type {
  JobProgress,
  JobProgressEvent,
  JobStatus,
  ProgressReport,
} from "../../shared/protocol/index.ts";

/**
 * A running attempt's heartbeat, with its latest progress when given; undefined when the
 * attempt is not the running one.
 *
 * `updated_at` is indexed (jobs_running_updated), so a beat that moves it is no HOT update on
 * Postgres. Progress comes several times a second: within a second of the last move it
 * leaves `updated_at` be (the sweeper judges staleness in lease-seconds), and the update,
 * touching only the unindexed `progress`, stays HOT.
 */
export function heartbeat(
  db: Kysely<Database>,
  beat: { id: string; attempt: number; now: number; progress?: string },
) {
  const { id, attempt, now, progress } = beat;
  const recent = sql<number>`CASE WHEN updated_at < ${now - 1000} THEN ${now} ELSE updated_at END`;
  return db
    .updateTable("jobs")
    .set(progress === undefined ? { updated_at: now } : { updated_at: recent, progress })
    .where("id", "=", id)
    .where("status", "=", "running")
    .where("attempt", "=", attempt)
    .returningAll()
    .executeTakeFirst();
}

/** `jobs.progress` as stored (migration 0015): the report, its attempt and when it came. */
export interface StoredProgress {
  attempt: number;
  fraction: number;
  stage: string;
  message: string | null;
  at: number;
}

export function storedProgress(report: ProgressReport, attempt: number, now: number): string {
  const stored: StoredProgress = {
    attempt,
    fraction: report.fraction,
    stage: report.stage,
    message: report.message ?? null,
    at: now,
  };
  return JSON.stringify(stored);
}

/** Parses the column (or a change-feed payload); null for anything that is not one. */
export function parseStoredProgress(text: string | null | undefined): StoredProgress | null {
  if (!text) return null;
  try {
    const value = JSON.parse(text) as Partial<StoredProgress>;
    if (typeof value.fraction !== "number" || typeof value.stage !== "string") return null;
    if (typeof value.attempt !== "number" || typeof value.at !== "number") return null;
    return { ...value, message: value.message ?? null } as StoredProgress;
  } catch {
    return null;
  }
}

export function toJobProgress(stored: StoredProgress): JobProgress {
  return {
    fraction: stored.fraction,
    stage: stored.stage,
    message: stored.message,
    updated_at: new Date(stored.at).toISOString(),
  };
}

/**
 * The job resource's `progress`: the latest report of the current attempt. A job back in the
 * queue shows none (its next attempt starts over); an ended one keeps where it stopped, and a
 * succeeded one says it is all done.
 */
export function progressOfRow(row: {
  status: string;
  attempt: number;
  progress?: string | null;
}): JobProgress | null {
  const stored = parseStoredProgress(row.progress);
  if (!stored || stored.attempt !== row.attempt) return null;
  const status = row.status as JobStatus;
  if (status === "queued") return null;
  const progress = toJobProgress(stored);
  return status === "succeeded" ? { ...progress, fraction: 1 } : progress;
}

export function toProgressEvent(
  jobId: string,
  stored: StoredProgress,
  model?: string,
): JobProgressEvent {
  return {
    job_id: jobId,
    attempt: stored.attempt,
    ...toJobProgress(stored),
    ...(model === undefined ? {} : { model }),
  };
}
