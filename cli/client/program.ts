import { Command, CommanderError, Option } from "commander";
import { APIError, ConnectionError, GantryError } from "../../client/index.ts";
import { USAGE_EXIT } from "../../shared/cli-errors.ts";
import { UserError } from "../../shared/errors.ts";
import { JobStatus } from "../../shared/protocol/job.ts";
import { collectParam, Interrupted } from "./common.ts";
import { jobsCancel, jobsGet, jobsList, jobsRetry, jobsWatch } from "./jobs-command.ts";
import { modelsCommand } from "./models-command.ts";
import { runCommand } from "./run-command.ts";
import { submitCommand } from "./submit-command.ts";
import { usageCommand } from "./usage-command.ts";

/** The commands that talk to a gateway through the SDK (`GANTRY_URL`, `GANTRY_KEY`). */
export const CLIENT_COMMANDS = new Set(["run", "submit", "jobs", "models", "usage"]);

function program(env: NodeJS.ProcessEnv): Command {
  const root = new Command("gantry")
    .description(
      "Talk to a Gantry gateway: GANTRY_URL (default http://127.0.0.1:8787) and GANTRY_KEY",
    )
    .exitOverride()
    .configureOutput({
      writeErr: (text) => process.stderr.write(text),
      // One voice for every mistake: "gantry: …", as the commands' own errors read.
      outputError: (text, write) => write(`gantry: ${text.replace(/^error: /, "")}`),
    })
    .showHelpAfterError("(add --help for usage)");
  root
    .command("run")
    .description("upload a file, run one job, print its result (OCR text, or saved artifact paths)")
    .argument("<model>", "the model's id (gantry models lists them)")
    .argument("[file]", "input image: a path, or an upl_… id or https URL")
    .option("--param <key=value>", "a model parameter (repeatable)", collectParam)
    .option("--json", "print the job as JSON, and nothing else")
    .option("--out <dir>", "where artifacts are saved", ".")
    .option(
      "--max-wait <seconds>",
      "stop waiting after this long (the job goes on at the gateway); exits 124",
    )
    .action((model: string, file: string | undefined, flags) =>
      runCommand(model, file, flags, env),
    );
  root
    .command("submit")
    .description(
      "run a job for every file of folders, files or globs; results into --out, resumable",
    )
    .argument("<model>", "the model's id (gantry models lists them)")
    .argument("<inputs...>", "folders, files or globs")
    .requiredOption("--out <dir>", "results, summary.json and the resume manifest")
    .option("--concurrency <n>", "files in flight at once", "16")
    .option("--param <key=value>", "a model parameter for every job (repeatable)", collectParam)
    .option("--json", "print the summary as JSON on stdout, and no progress")
    .option("--retry-failed", "retry the jobs of files an earlier run wrote as failed")
    .action((model: string, inputs: string[], flags) => submitCommand(model, inputs, flags, env));
  const jobs = root.command("jobs").description("list, show, cancel and follow jobs");
  jobs
    .command("list")
    .description("your tenant's jobs, newest first")
    // Checked here, a mistake of the user's (exit 2), not sent for the gateway to refuse.
    .addOption(
      new Option("--status <status>", "only jobs in this state").choices(JobStatus.options),
    )
    .option("--model <id>", "only this model's jobs")
    .option("--limit <n>", "how many, newest first", "20")
    .option("--json", "one JSON job per line")
    .action((flags) => jobsList(flags, env));
  jobs
    .command("get")
    .description("one job: its status, output or error, and where it waits")
    .argument("<id>", "the job's id (job_…)")
    .option("--json", "the job as JSON")
    .action((id: string, flags) => jobsGet(id, flags, env));
  jobs
    .command("cancel")
    .description("cancel a queued or running job")
    .argument("<id>", "the job's id (job_…)")
    .option("--json", "the canceled job as JSON")
    .action((id: string, flags) => jobsCancel(id, flags, env));
  jobs
    .command("retry")
    .description("put a failed, expired or canceled job back in the queue")
    .argument("<id>", "the job's id (job_…)")
    .option("--json", "the job as JSON")
    .action((id: string, flags) => jobsRetry(id, flags, env));
  jobs
    .command("watch")
    .description("follow the job's event stream until it ends")
    .argument("<id>", "the job's id (job_…)")
    .option("--json", "one JSON event per line")
    .action((id: string, flags) => jobsWatch(id, flags, env));
  root
    .command("models")
    .description("the models served and their parameters; with a model, its live state too")
    .argument("[model]", "one model's id: adds its queue, agents, pace and waits")
    .option("--json", "the models (or the one model) as JSON")
    .action((id: string | undefined, flags) => modelsCommand(id, flags, env));
  root
    .command("usage")
    .description("your device time per model and day this month, and what your budget has left")
    .option("--from <date>", "first day (2026-12-01) or instant; default this month's start")
    .option("--to <date>", "up to (not including); default now")
    .option("--by <groups>", "model, key and/or day, comma-separated", "model,day")
    .option("--json", "the report as JSON")
    .action((flags) => usageCommand(flags, env));
  return root;
}

/**
 * Whether the detail already says the field's error, in its own words: `body: model:
 * required`, `input.image points to a forbidden address …`, "`to` must be after `from`": the
 * field's message, and the field named by its last part.
 */
function saysAlready(detail: string, field: { path: string; message: string }): boolean {
  const name = field.path.split(".").at(-1) ?? field.path;
  const named = new RegExp(`(^|[^\\w])${name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}([^\\w]|$)`);
  return detail.includes(field.message) && named.test(detail);
}

/** Runs one client command; errors become a message on stderr and an exit status. */
export async function runClientCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  try {
    await program(env).parseAsync(argv, { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version end 0; a missing argument or an unknown option is a usage error,
      // 2 as every other mistake of the user's (commander says 1).
      process.exitCode = error.exitCode === 0 ? 0 : USAGE_EXIT;
      return;
    }
    if (error instanceof APIError) {
      process.stderr.write(`gantry: ${error.message}\n`);
      // The gateway's detail names the first field's error: list the others below it.
      for (const field of error.errors) {
        if (!saysAlready(error.message, field)) {
          process.stderr.write(`  ${field.path}: ${field.message}\n`);
        }
      }
      process.exitCode = 1;
      return;
    }
    if (error instanceof ConnectionError || error instanceof UserError) {
      process.stderr.write(`gantry: ${error.message}\n`);
      process.exitCode =
        error instanceof Interrupted ? error.exitCode : error instanceof UserError ? USAGE_EXIT : 1;
      return;
    }
    // The SDK's own refusal of what it was given (a path it cannot read, a URL that is not
    // https) is the user's to fix; any other of its errors ends the command.
    if (error instanceof GantryError) {
      process.stderr.write(`gantry: ${error.message}\n`);
      process.exitCode = error.constructor === GantryError ? USAGE_EXIT : 1;
      return;
    }
    throw error;
  }
}
