import { mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";

const REASONS: Record<string, string> = {
  EACCES: "permission denied",
  EPERM: "permission denied",
  EROFS: "the file system is read-only",
  ENOTDIR: "a part of the path is a file, not a folder",
  ENOSPC: "no space left on the device",
  ENOENT: "the file system refuses to make it there",
  FILE: "a file is where a folder must be",
};

/** Why the file system refused, in words a user acts on; the error itself when unknown. */
export function fsReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code ?? "";
  return REASONS[code] ?? String(error);
}

/**
 * Makes the folder `path` and any missing folder above it, each with `mode`, as `mkdir -p`
 * does; true when it made `path`. Throws the refusal (its `code` is `FILE` when something
 * else is in the way). One level at a time by hand: Node 20's `mkdir(path, { recursive:
 * true })` never returns for a path the kernel refuses under a parent that exists (any path
 * under /proc), and these paths come from users (`--out`, `GANTRY_DATA_DIR`).
 */
export function makeFolderSync(path: string, mode?: number): boolean {
  let outcome = tryMkdir(path, mode);
  if (outcome instanceof Error && outcome.code === "ENOENT" && dirname(path) !== path) {
    makeFolderSync(dirname(path), mode);
    outcome = tryMkdir(path, mode);
  }
  if (outcome instanceof Error) throw outcome;
  return outcome === "made";
}

function tryMkdir(path: string, mode?: number): "made" | "there" | NodeJS.ErrnoException {
  try {
    mkdirSync(path, mode === undefined ? undefined : { mode });
    return "made";
  } catch (error) {
    const refusal = error as NodeJS.ErrnoException;
    if (refusal.code !== "EEXIST") return refusal;
    if (statSync(path).isDirectory()) return "there";
    return Object.assign(new Error(`${path} is not a folder`), { code: "FILE" });
  }
}
