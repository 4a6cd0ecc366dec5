import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { APIError, type Gantry, type TypedJob } from "../../client/index.ts";
import { UserError } from "../../shared/errors.ts";
import {
  clientFromEnv,
  Interrupted,
  outputWithoutBytes,
  saveArtifacts,
  writeAtomic,
} from "./common.ts";
import { checkParams } from "./model-params.ts";
import {
  countInputFiles,
  type InputFile,
  inputFiles,
  sha256File,
  submitKey,
} from "./submit-files.ts";
import { emptyCounts, type SubmitCounts, SubmitProgress } from "./submit-progress.ts";
import { retryFailedFile, writtenFailure } from "./submit-retry.ts";
import { SubmitState } from "./submit-state.ts";
import { type JobSnapshot, SUBMIT_TAG, SubmitTracker, submitTag } from "./submit-tracker.ts";

export interface SubmitFlags {
  out: string;
  concurrency?: string;
  param?: Record<string, unknown>;
  json?: boolean;
  /** Files an earlier run wrote as failed get their jobs retried instead of being skipped. */
  retryFailed?: boolean;
}

/** Failures listed by name in summary.json; the counts cover the rest. */
const LISTED_FAILURES = 1000;

interface Failure {
  file: string;
  job_id: string;
  code: string;
  message: string;
}

/**
 * `gantry submit MODEL DIR|FILE|GLOB… --out DIR`: every file becomes a job, at most
 * `--concurrency` in flight; each result lands in `--out` under the file's name
 * (`name.json`, `name.error.json`, artifacts as `name.<artifact>.<ext>`), then summary.json.
 * Started again, it skips what is written and submits nothing twice.
 */
export async function submitCommand(
  model: string,
  args: string[],
  flags: SubmitFlags,
  env: NodeJS.ProcessEnv,
) {
  const concurrency = Number(flags.concurrency ?? 16);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1024)
    throw new UserError("--concurrency must be an integer from 1 to 1024");
  if (args.length === 0) throw new UserError("name at least one folder, file or glob");
  const gantry = clientFromEnv(env, { maxRetries: 8 });
  // Asked once before any file: a mistyped model or a bad key must not upload every file
  // only to write an error for each (the APIError ends the command, exit 1), nor a
  // mistyped parameter (a UserError, exit 2).
  const params = flags.param ?? {};
  checkParams(await gantry.models.get(model), params);
  const counts = emptyCounts(await countInputFiles(args, flags.out));
  // A wrong folder, or one of PDFs, is the user's to fix: not a run that "succeeded" on nothing.
  if (counts.total === 0)
    throw new UserError(
      `no image or JSON files in ${args.join(", ")} (hidden files are passed over)`,
    );
  const state = await SubmitState.open(flags.out);
  const progress = new SubmitProgress(counts, {
    tty: Boolean(process.stderr.isTTY),
    quiet: Boolean(flags.json),
  });
  const failures: Failure[] = [];
  const startedAt = new Date();
  const controller = new AbortController();
  const interrupt = () =>
    controller.abort(new Interrupted("interrupted: run the same command again to resume"));
  process.once("SIGINT", interrupt);
  process.once("SIGTERM", interrupt);
  // One event stream for every job of the run, open before the first is made.
  const tracker = new SubmitTracker(gantry, submitTag(flags.out), controller.signal);
  try {
    await tracker.ready;
  } catch (error) {
    process.off("SIGINT", interrupt);
    process.off("SIGTERM", interrupt);
    progress.stop();
    await state.close();
    throw error;
  }

  const files = inputFiles(args, flags.out);
  /** The file's job: the one this out folder's runs made already, else a new one. */
  const madeOrSubmitted = async (file: InputFile) => {
    const key = submitKey(model, params, await sha256File(file.path), tracker.tag);
    const recorded = state.jobFor(key);
    if (recorded) return { id: recorded, snapshot: null };
    return submitOne(
      gantry,
      model,
      params,
      file,
      key,
      tracker.tag,
      state,
      controller.signal,
      counts,
    );
  };
  const one = async (file: InputFile) => {
    const base = join(flags.out, file.name);
    const succeededBefore = existsSync(`${base}.json`);
    const failedBefore = existsSync(`${base}.error.json`);
    if (succeededBefore || (failedBefore && !flags.retryFailed)) {
      counts.resumed++;
      if (succeededBefore) counts.succeeded++;
      else {
        counts.failed++;
        // Listed again: summary.json is rewritten by every run, and is where a script
        // reads which files failed.
        if (failures.length < LISTED_FAILURES)
          failures.push(await writtenFailure(file.name, `${base}.error.json`));
      }
      return;
    }
    const retried = failedBefore
      ? await retryFailedFile(gantry, `${base}.error.json`, controller.signal)
      : null;
    // Said as what it is, with no upload: the upload's refusal named `size_bytes`.
    if (!retried && (await stat(file.path).catch(() => null))?.size === 0) {
      const empty = {
        code: "empty_file",
        message: `${file.name} is empty (0 bytes)`,
        status: null,
      };
      return writeRefusal(file, empty, flags.out, failures, counts);
    }
    if (retried) counts.retried++;
    const { id, snapshot } = retried ?? (await madeOrSubmitted(file));
    let status = "";
    const onStatus = (next: string) => {
      if (next === status) return;
      if (status === "queued") counts.queued--;
      if (status === "running") counts.running--;
      status = next;
      if (status === "queued") counts.queued++;
      if (status === "running") counts.running++;
    };
    const job = await tracker.settle(id, snapshot, onStatus, controller.signal);
    onStatus(job.status);
    await writeResult(gantry, job, base, file, failures, counts);
  };
  // A fixed pool pulling from one generator: files are read as they are needed.
  const worker = async () => {
    for (let next = await files.next(); !next.done; next = await files.next()) {
      if (controller.signal.aborted) return;
      try {
        await one(next.value);
      } catch (error) {
        // The gateway refused this file (its type, its size): note it and go on. Anything
        // else (the gateway unreachable after every retry, an interrupt, a refusal of the
        // caller) stops the run.
        if (!(error instanceof APIError) || !refusesFile(error) || controller.signal.aborted)
          throw error;
        const { code, message, status } = error;
        await writeRefusal(next.value, { code, message, status }, flags.out, failures, counts);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    process.off("SIGINT", interrupt);
    process.off("SIGTERM", interrupt);
    progress.stop();
    await tracker.close();
    await state.close();
  }
  const finishedAt = new Date();
  const summary = {
    model,
    params,
    inputs: args,
    out: flags.out,
    total: counts.total,
    succeeded: counts.succeeded,
    failed: counts.failed,
    submitted: counts.submitted,
    resumed: counts.resumed,
    retried: counts.retried,
    started_at: startedAt.toISOString(),
    finished_at: finishedAt.toISOString(),
    wall_seconds: (finishedAt.getTime() - startedAt.getTime()) / 1000,
    failures,
  };
  await writeAtomic(join(flags.out, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
  if (flags.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else
    process.stderr.write(
      `gantry submit: ${counts.succeeded} succeeded, ${counts.failed} failed; results in ${flags.out}\n`,
    );
  if (counts.failed > 0) process.exitCode = 1;
}

/** Uploads the file and makes its job under `key`, adopting the job an earlier run made. */
async function submitOne(
  gantry: Gantry,
  model: string,
  params: Record<string, unknown>,
  file: InputFile,
  key: string,
  tag: string,
  state: SubmitState,
  signal: AbortSignal,
  counts: SubmitCounts,
): Promise<{ id: string; snapshot: JobSnapshot | null }> {
  const upload = await gantry.uploads.create(file.path, { signal });
  let jobId: string;
  let snapshot: JobSnapshot | null = null;
  try {
    const job = await gantry.jobs.create(
      { model, input: { ...params, image: upload.id }, metadata: { [SUBMIT_TAG]: tag } },
      { idempotencyKey: key, signal },
    );
    jobId = job.id;
    // An earlier run's job (the same key and request) comes back as it stands now.
    snapshot = { status: job.status, metadata: job.metadata };
    counts.submitted++;
  } catch (error) {
    // The earlier run made this job, but was stopped before it wrote it down.
    const earlier =
      error instanceof APIError && error.code === "idempotency_key_reused"
        ? error.problem.job_id
        : undefined;
    if (typeof earlier !== "string") throw error;
    jobId = earlier;
  }
  state.record(key, jobId, file.name);
  return { id: jobId, snapshot };
}

async function writeResult(
  gantry: Gantry,
  job: TypedJob,
  base: string,
  file: InputFile,
  failures: Failure[],
  counts: SubmitCounts,
): Promise<void> {
  if (job.status === "succeeded") {
    await saveArtifacts(gantry, job, base);
    await writeAtomic(`${base}.json`, `${JSON.stringify(outputWithoutBytes(job.output))}\n`);
    counts.succeeded++;
    return;
  }
  const error = job.error ?? { type: "permanent", code: job.status, message: `job ${job.status}` };
  await writeAtomic(
    `${base}.error.json`,
    `${JSON.stringify({ job_id: job.id, status: job.status, error })}\n`,
  );
  counts.failed++;
  if (failures.length < LISTED_FAILURES)
    failures.push({ file: file.name, job_id: job.id, code: error.code, message: error.message });
}

async function writeRefusal(
  file: InputFile,
  problem: { code: string; message: string; status: number | null },
  out: string,
  failures: Failure[],
  counts: SubmitCounts,
) {
  await writeAtomic(
    `${join(out, file.name)}.error.json`,
    `${JSON.stringify({ job_id: null, error: problem })}\n`,
  );
  counts.failed++;
  if (failures.length < LISTED_FAILURES)
    failures.push({ file: file.name, job_id: "", code: problem.code, message: problem.message });
}

/**
 * A refusal of this file, to note as its result. A key that is not valid or may not submit
 * (401, 403), or a tenant over a limit the retries did not outwait (429: its rate, its
 * queued jobs, its month's budget), refuses every file alike: written as each one's error,
 * every file was uploaded to be refused and then stayed failed on a resumed run.
 */
function refusesFile(error: APIError): boolean {
  return error.status < 500 && ![401, 403, 429].includes(error.status);
}
