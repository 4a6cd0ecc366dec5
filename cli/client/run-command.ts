import { stat } from "node:fs/promises";
import { basename, join } from "node:path";
import ora from "ora";
import { isInputRef, isUrl } from "../../client/files.ts";
import { JobFailedError, type JobUpdate } from "../../client/index.ts";
import { UserError } from "../../shared/errors.ts";
import {
  artifactsOf,
  clientFromEnv,
  GaveUpWaiting,
  Interrupted,
  JOB_FAILED_EXIT,
  outputWithoutBytes,
  saveArtifacts,
} from "./common.ts";
import { checkParams } from "./model-params.ts";

/** How often `gantry run` asks why a queued job waits. */
const WAITING_POLL_MS = 2_000;

export interface RunFlags {
  param?: Record<string, unknown>;
  json?: boolean;
  out?: string;
  maxWait?: string;
}

/** `--max-wait` in milliseconds; null when not given. */
function maxWaitMs(value: string | undefined): number | null {
  if (value === undefined) return null;
  const seconds = Number(value);
  if (!value.trim() || !Number.isFinite(seconds) || seconds <= 0 || seconds > 2_592_000) {
    throw new UserError(`--max-wait must be a number of seconds above 0 (got "${value}")`);
  }
  return seconds * 1000;
}

/** What is left at the gateway when the CLI stops waiting, and how to reach it. */
function leftBehind(jobId: string, why: string): string {
  return jobId
    ? `${why}; job ${jobId} goes on: \`gantry jobs watch ${jobId}\` follows it, \`gantry jobs cancel ${jobId}\` stops it`
    : `${why} before the job was made`;
}

/** One line a person reads: where the job stands. */
export function describeUpdate(update: JobUpdate): string {
  const parts: string[] = [update.status];
  if (update.queue_position !== undefined) parts.push(`position ${update.queue_position}`);
  if (update.progress !== undefined) {
    const done = `${Math.round(update.progress * 100)}%`;
    parts.push(update.stage ? `${update.stage} ${done}` : done);
  }
  if (update.attempt && update.attempt > 1) parts.push(`attempt ${update.attempt}`);
  const line = `${update.job_id}: ${parts.join(", ")}`;
  // Why it waits, as the gateway says (GET /v1/jobs/{id}): a sentence of its own.
  if (update.status === "queued" && update.waiting_detail)
    return `${line}. ${update.waiting_detail}`;
  return line;
}

/**
 * `gantry run MODEL FILE`: uploads, submits, shows where the job stands on stderr (a spinner
 * in a terminal, plain lines otherwise), and prints the result on stdout.
 */
export async function runCommand(
  model: string,
  file: string | undefined,
  flags: RunFlags,
  env: NodeJS.ProcessEnv,
) {
  const gantry = clientFromEnv(env);
  const maxWait = maxWaitMs(flags.maxWait);
  if (file && !isInputRef(file)) await requireFile(file);
  // Asked before the upload: a mistyped model or parameter costs no upload.
  checkParams(await gantry.models.get(model), flags.param ?? {}, { file: file !== undefined });
  // A terminal of no width (some CI pseudo-terminals) makes ora redraw without end.
  const interactive =
    Boolean(process.stderr.isTTY) && (process.stderr.columns ?? 0) > 0 && !flags.json;
  // An upl_… id or an https URL is sent as it is: nothing is uploaded.
  const first = file && !isInputRef(file) ? `uploading ${file}` : `submitting ${model}`;
  // ora draws in a terminal only; elsewhere each change is a plain line (none with --json).
  const spinner = interactive ? ora({ stream: process.stderr, text: first }).start() : null;
  if (!interactive && !flags.json) process.stderr.write(`${first}\n`);
  let last = "";
  let jobId = "";
  let queued = false;
  const show = (update: JobUpdate) => {
    const line = describeUpdate(update);
    if (line === last) return;
    last = line;
    if (spinner) spinner.text = line;
    else if (!flags.json) process.stderr.write(`${line}\n`);
  };
  const onProgress = (update: JobUpdate) => {
    jobId = update.job_id;
    queued = update.status === "queued";
    show(update);
  };
  // The event stream says when the job changes, not why a queued one waits: while it is
  // queued, its reason is read every few seconds (waiting_reason, waiting_detail).
  const reasons = setInterval(() => {
    if (!queued || !jobId || flags.json) return;
    gantry.jobs.get(jobId).then(
      (job) => {
        if (!queued || job.status !== "queued") return;
        show({
          job_id: job.id,
          status: job.status,
          attempt: job.attempt,
          ...(job.queue_position === undefined ? {} : { queue_position: job.queue_position }),
          ...(job.waiting_reason ? { waiting_reason: job.waiting_reason } : {}),
          ...(job.waiting_detail ? { waiting_detail: job.waiting_detail } : {}),
        });
      },
      () => {},
    );
  }, WAITING_POLL_MS);
  const controller = new AbortController();
  // The job, once made, goes on at the gateway: say how to follow or stop it.
  const onSigint = () => controller.abort(new Interrupted(leftBehind(jobId, "interrupted")));
  process.once("SIGINT", onSigint);
  // From the start, upload included: a script's bound on the whole command.
  const giveUp =
    maxWait === null
      ? undefined
      : setTimeout(() => {
          const why = `gave up waiting after ${flags.maxWait} s (--max-wait)${queued ? ", the job still queued" : ""}`;
          controller.abort(new GaveUpWaiting(leftBehind(jobId, why)));
        }, maxWait);
  try {
    let image = file;
    if (file && !isInputRef(file))
      image = (await gantry.uploads.create(file, { signal: controller.signal })).id;
    if (spinner) spinner.text = `submitting ${model}`;
    const input = { ...(flags.param ?? {}), ...(image ? { image } : {}) };
    // Shown progress needs the event stream; --json may let the gateway hold the answer.
    const wait = flags.json ? 60 : 0;
    const output = await gantry.run(model, input, { onProgress, signal: controller.signal, wait });
    spinner?.stop();
    const job = await gantry.jobs.get(jobId);
    const saved = artifactsOf(output).length
      ? await saveArtifacts(gantry, job, join(flags.out ?? ".", basename(file ?? model)))
      : [];
    if (flags.json) {
      process.stdout.write(
        `${JSON.stringify({ ...job, output: outputWithoutBytes(job.output), files: saved })}\n`,
      );
    } else if (saved.length) {
      for (const path of saved) process.stdout.write(`${path}\n`);
    } else if (typeof (output as { text?: unknown }).text === "string") {
      process.stdout.write(`${(output as { text: string }).text}\n`);
    } else {
      process.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
    }
  } catch (error) {
    spinner?.stop();
    if (!(error instanceof JobFailedError)) throw error;
    if (flags.json) process.stdout.write(`${JSON.stringify(error.job)}\n`);
    process.stderr.write(`gantry: ${error.message}\n${error.code}\n`);
    process.exitCode = JOB_FAILED_EXIT;
  } finally {
    clearInterval(reasons);
    clearTimeout(giveUp);
    process.off("SIGINT", onSigint);
  }
}

/** A missing path, a folder or an empty file is the user's mistake: one line, no request. */
async function requireFile(path: string): Promise<void> {
  if (isUrl(path)) {
    throw new UserError(`${path}: input URLs must be https (or give a file or an upl_… id)`);
  }
  const found = await stat(path).catch(() => null);
  if (!found) throw new UserError(`cannot read ${path}: no such file`);
  if (!found.isFile()) {
    throw new UserError(
      `${path} is not a file (for a folder, use "gantry submit MODEL DIR --out DIR")`,
    );
  }
  // Else the upload's refusal (`size_bytes: must be more than 0`) names a field never written.
  if (found.size === 0) throw new UserError(`${path} is empty (0 bytes): nothing to run`);
}
