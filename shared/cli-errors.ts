/**
 * How both command lines (`gantry`, `gantry-agent`) end on an error. A user's mistake (a
 * `UserError`: a bad flag or setting; or a flag `parseArgs` refused) is one plain message
 * and exit status 2, with no stack to wade through; anything else is a bug or an outage to
 * report, so it shows its stack and exits 1. Node only (process); the rest of `shared/` is not.
 */
import { UserError } from "./errors.ts";

export const USAGE_EXIT = 2;
export const INTERNAL_EXIT = 1;

/** `parseArgs` throws TypeErrors with codes such as ERR_PARSE_ARGS_UNKNOWN_OPTION. */
function isParseArgsError(error: unknown): error is Error & { code: string } {
  return (
    error instanceof TypeError &&
    "code" in error &&
    typeof error.code === "string" &&
    error.code.startsWith("ERR_PARSE_ARGS")
  );
}

/** Whether `error` is the user's to fix rather than a bug. */
export function isUserMistake(error: unknown): error is Error {
  return error instanceof UserError || isParseArgsError(error);
}

/** Writes what `program` says about `error` and returns the exit status it ends with. */
export function reportCliError(
  program: string,
  error: unknown,
  write: (text: string) => void = (text) => void process.stderr.write(text),
): number {
  if (isUserMistake(error)) {
    write(`${program}: ${error.message}\n`);
    return USAGE_EXIT;
  }
  const shown = error instanceof Error ? (error.stack ?? error.message) : String(error);
  write(`${program}: internal error: ${shown}\n`);
  return INTERNAL_EXIT;
}

/** Runs a command's body; an error becomes its report and `process.exitCode`. */
export async function runCommand(program: string, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (error) {
    process.exitCode = reportCliError(program, error);
  }
}
