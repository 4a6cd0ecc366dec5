import { readFile, rm } from "node:fs/promises";
import { APIError, type Gantry } from "../../client/index.ts";
import type { JobSnapshot } from "./submit-tracker.ts";

/**
 * `gantry submit --retry-failed`: the job an earlier run wrote as failed (`name.error.json`)
 * goes back in the queue under its id (`POST /v1/jobs/{id}/retry`), rather than being
 * submitted again, which its idempotency key would answer with the same failed job. Its
 * error file goes once the retry is accepted, so a run stopped in between retries it again.
 *
 * Null when the file never had a job (the gateway refused it at submit): it is submitted
 * afresh, its error file gone.
 */
export async function retryFailedFile(
  gantry: Gantry,
  errorPath: string,
  signal: AbortSignal,
): Promise<{ id: string; snapshot: JobSnapshot } | null> {
  const written = JSON.parse(await readFile(errorPath, "utf8")) as { job_id?: unknown };
  if (typeof written.job_id !== "string") {
    await rm(errorPath, { force: true });
    return null;
  }
  const id = written.job_id;
  const job = await gantry.jobs.retry(id, { signal }).catch((error: unknown) => {
    // Retried meanwhile (another run, the console): follow it as it stands.
    if (error instanceof APIError && error.code === "job_not_retryable")
      return gantry.jobs.get(id, { signal });
    throw error;
  });
  await rm(errorPath, { force: true });
  return { id, snapshot: { status: job.status, metadata: job.metadata } };
}

/**
 * What an earlier run wrote as a file's failure (a job's end, or a refusal at submit), for a
 * resumed run's summary.json. A file cut short by a kill says only which file failed.
 */
export async function writtenFailure(
  file: string,
  errorPath: string,
): Promise<{ file: string; job_id: string; code: string; message: string }> {
  let written: { job_id?: unknown; error?: { code?: unknown; message?: unknown } } = {};
  try {
    written = JSON.parse(await readFile(errorPath, "utf8")) as typeof written;
  } catch {
    // Unreadable: the file still counts as failed, as its error file's presence says.
  }
  const text = (value: unknown) => (typeof value === "string" ? value : "");
  return {
    file,
    job_id: text(written.job_id),
    code: text(written.error?.code),
    message: text(written.error?.message),
  };
}
