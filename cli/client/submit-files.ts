import { createHash } from "node:crypto";
import { createReadStream, type Dirent } from "node:fs";
import { opendir, stat } from "node:fs/promises";
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import { glob } from "tinyglobby";
import { typeFromName } from "../../client/files.ts";
import { UserError } from "../../shared/errors.ts";

export interface InputFile {
  path: string;
  /** Where its results go under `--out`: its path below the folder it was found in. */
  name: string;
}

/** Whether `path` is `folder` or inside it. */
function within(folder: string, path: string): boolean {
  const rest = relative(folder, resolve(path));
  return rest === "" || (!rest.startsWith("..") && !isAbsolute(rest));
}

/**
 * Every file the arguments name, one at a time: folders are read as a stream (never listed
 * whole, so 100 000 files cost no more memory than ten), keeping the files of a type some
 * model takes; a file is taken as it is; anything else is a glob.
 *
 * Nothing under `skip` (the run's `--out`) is an input: an out folder inside the input
 * folder would otherwise send the results of the last run (JSON, artifact images) as jobs.
 */
export async function* inputFiles(
  args: readonly string[],
  skip?: string,
): AsyncGenerator<InputFile> {
  const skipped = (path: string) => skip !== undefined && within(resolve(skip), path);
  for (const arg of args) {
    const info = await stat(arg).catch(() => null);
    if (info?.isDirectory()) {
      for await (const entry of await opendir(arg, { recursive: true, bufferSize: 256 })) {
        if (entry.name.startsWith(".") || !typeFromName(entry.name)) continue;
        const path = join(entry.parentPath, entry.name);
        if (skipped(path) || !(entry.isFile() || (await linksToFile(entry, path)))) continue;
        yield { path, name: relative(arg, path) };
      }
    } else if (info?.isFile()) {
      yield { path: arg, name: basename(arg) };
    } else {
      const matches = await glob(arg, { onlyFiles: true, absolute: false });
      if (matches.length === 0)
        throw new UserError(`${arg}: no such file, folder or matching glob`);
      for (const path of matches) {
        if (skipped(path)) continue;
        yield { path, name: isAbsolute(path) || path.startsWith("..") ? basename(path) : path };
      }
    }
  }
}

/**
 * A link to a file counts as the file (datasets kept by DVC or git-annex are links into a
 * cache); the walk itself follows no link, so a link to a folder (a loop, say) is not walked.
 * A dangling link is passed over, as a file that is not there.
 */
async function linksToFile(entry: Dirent, path: string): Promise<boolean> {
  if (!entry.isSymbolicLink()) return false;
  return (await stat(path).catch(() => null))?.isFile() ?? false;
}

/** How many files the arguments name (a streaming pass, for the progress bar's total). */
export async function countInputFiles(args: readonly string[], skip?: string): Promise<number> {
  let n = 0;
  for await (const _ of inputFiles(args, skip)) n++;
  return n;
}

export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Sorted keys, so the same parameters always make the same key. */
const canonical = (value: Record<string, unknown>): string =>
  JSON.stringify(Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b))));

/**
 * The job's Idempotency-Key, from what decides its result (the file's bytes, the model and
 * its parameters) and the runs it belongs to (`tag`, one per `--out` folder): a resumed or
 * repeated run into the folder asks for the same job instead of a new one, while a run into
 * another folder makes its own (it would otherwise be handed the other folder's jobs, failed
 * ones included, and count them as neither submitted nor resumed).
 */
export function submitKey(
  model: string,
  params: Record<string, unknown>,
  contentHash: string,
  tag: string,
): string {
  const digest = createHash("sha256")
    .update(`${model}\n${canonical(params)}\n${contentHash}\n${tag}`)
    .digest("hex");
  return `gantry-submit-${digest.slice(0, 48)}`;
}
