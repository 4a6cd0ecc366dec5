import { JobFailedError, type TypedJob } from "../../client/index.ts";
import { UserError } from "../../shared/errors.ts";
import { clientFromEnv, JOB_FAILED_EXIT } from "./common.ts";

const row = (job: TypedJob) =>
  `${job.id}  ${job.model.padEnd(10)} ${job.status.padEnd(9)} ${job.created_at}${job.error ? `  ${job.error.code}` : ""}\n`;

export async function jobsList(
  flags: { status?: string; model?: string; limit?: string; json?: boolean },
  env: NodeJS.ProcessEnv,
) {
  const gantry = clientFromEnv(env);
  const limit = Number(flags.limit ?? 20);
  if (!Number.isInteger(limit) || limit < 1)
    throw new UserError(`--limit must be a whole number of jobs, 1 or more (got ${flags.limit})`);
  let shown = 0;
  const status = flags.status as TypedJob["status"] | undefined;
  for await (const job of gantry.jobs.list({
    limit: Math.min(100, limit),
    ...(status ? { status } : {}),
    ...(flags.model ? { model: flags.model } : {}),
  })) {
    process.stdout.write(flags.json ? `${JSON.stringify(job)}\n` : row(job));
    if (++shown >= limit) break;
  }
}

export async function jobsGet(id: string, flags: { json?: boolean }, env: NodeJS.ProcessEnv) {
  const job = await clientFromEnv(env).jobs.get(id);
  process.stdout.write(
    flags.json ? `${JSON.stringify(job)}\n` : `${JSON.stringify(job, null, 2)}\n`,
  );
  // A person reading a queued job sees why it waits on its own line (stderr: stdout stays JSON).
  if (!flags.json && job.status === "queued" && job.waiting_detail) {
    process.stderr.write(`waiting: ${job.waiting_reason} (${job.waiting_detail})\n`);
  }
}

export async function jobsCancel(id: string, flags: { json?: boolean }, env: NodeJS.ProcessEnv) {
  const job = await clientFromEnv(env).jobs.cancel(id);
  process.stdout.write(flags.json ? `${JSON.stringify(job)}\n` : `${job.id} ${job.status}\n`);
}

export async function jobsRetry(id: string, flags: { json?: boolean }, env: NodeJS.ProcessEnv) {
  const job = await clientFromEnv(env).jobs.retry(id);
  process.stdout.write(flags.json ? `${JSON.stringify(job)}\n` : `${job.id} ${job.status}\n`);
}

/** `gantry jobs watch ID`: follows the event stream to the end; exits like `gantry run`. */
export async function jobsWatch(id: string, flags: { json?: boolean }, env: NodeJS.ProcessEnv) {
  const gantry = clientFromEnv(env);
  for await (const event of gantry.jobs.events(id)) {
    if (flags.json)
      process.stdout.write(`${JSON.stringify({ event: event.type, ...event.data })}\n`);
    else if (event.type === "status")
      process.stdout.write(
        `${event.data.at}  ${event.data.status}${event.data.attempt > 1 ? ` (attempt ${event.data.attempt})` : ""}\n`,
      );
    else {
      // As `gantry run` shows it: a person reads this; --json keeps the event as sent.
      const { updated_at, fraction, stage, message } = event.data;
      const detail = message ? ` (${message})` : "";
      process.stdout.write(
        `${updated_at}  running, ${stage} ${Math.round(fraction * 100)}%${detail}\n`,
      );
    }
  }
  const job = await gantry.jobs.get(id);
  if (job.status !== "succeeded") {
    const failed = new JobFailedError(job);
    process.stderr.write(`gantry: ${failed.message}\n${failed.code}\n`);
    process.exitCode = JOB_FAILED_EXIT;
  }
}

/** `gantry models`: each served model, the files it takes and its parameters. */
