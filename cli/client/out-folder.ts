import { mkdir, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { UserError } from "../../shared/errors.ts";

const REASONS: Record<string, string> = {
  EACCES: "permission denied",
  EPERM: "permission denied",
  EROFS: "the file system is read-only",
  ENOTDIR: "a part of the path is a file, not a folder",
  ENOSPC: "no space left on the device",
  ENOENT: "the file system refuses a folder there",
  FILE: "a file of that name is in the way",
};

/** A file system refusal of what the CLI writes, as one line the user can act on. */
export function cannotWrite(what: string, path: string, error: unknown): UserError {
  const code = (error as NodeJS.ErrnoException | null)?.code ?? "";
  return new UserError(`cannot write ${what} ${path}: ${REASONS[code] ?? String(error)}`);
}

/**
 * Makes the folder `path` and any missing folder above it, as `mkdir -p` does, or says in
 * one line why it cannot. One level at a time by hand: Node 20's `mkdir(path, { recursive:
 * true })` never returns for a path the kernel refuses under a parent that exists (any path
 * under /proc), and an `--out` may be anything.
 */
export async function makeFolder(path: string, what = "the folder"): Promise<void> {
  let failed = await tryMkdir(path);
  if (failed === "ENOENT" && dirname(path) !== path) {
    await makeFolder(dirname(path), what);
    failed = await tryMkdir(path);
  }
  if (failed) throw cannotWrite(what, path, { code: failed });
}

/** Null once `path` is a folder; else why not (`FILE`: something else is there). */
async function tryMkdir(path: string): Promise<string | null> {
  try {
    await mkdir(path);
    return null;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "EIO";
    if (code !== "EEXIST") return code;
    return (await stat(path)).isDirectory() ? null : "FILE";
  }
}
