import {
  chmodSync,
  closeSync,
  fchmodSync,
  lstatSync,
  openSync,
  readdirSync,
  statSync,
} from "node:fs";
import { join } from "node:path";
import { makeFolderSync } from "./folders.ts";

/**
 * Modes for what only the gateway's own user may read: the data directory holds the
 * database (agent HMAC secrets, webhook secrets, API key hashes), secrets.json and the
 * blobs. Set explicitly after creating, so they hold whatever the process's umask.
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** Group or other bits: anything beyond the owner's. */
const SHARED_BITS = 0o077;

/** What `ensurePrivateDir` changed: paths it tightened, each with its mode before. */
export interface Tightened {
  path: string;
  from: number;
  to: number;
}

/**
 * Makes `dir` (and any missing parent inside it) mode 0700, and tightens what an earlier
 * version left readable: the directory itself to 0700, and, when it was open to others,
 * every file beneath it to 0600 and every folder to 0700 (a 0700 directory already keeps
 * others out of everything beneath it, so a tight one is not walked again: only its own
 * entries are checked). Symbolic links inside it are neither followed nor changed.
 */
export function ensurePrivateDir(dir: string): { created: boolean; tightened: Tightened[] } {
  const tightened: Tightened[] = [];
  if (makeFolderSync(dir, PRIVATE_DIR_MODE)) {
    // mkdir's mode is filtered by the umask; chmod is not.
    chmodSync(dir, PRIVATE_DIR_MODE);
    return { created: true, tightened };
  }
  // The directory itself may be a link the operator made to where the data lives.
  const wasOpen = tighten(dir, PRIVATE_DIR_MODE, tightened, true);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      const open = tighten(path, PRIVATE_DIR_MODE, tightened);
      if (wasOpen || open) tightenTree(path, tightened);
    } else if (entry.isFile()) {
      tighten(path, PRIVATE_FILE_MODE, tightened);
    }
  }
  return { created: false, tightened };
}

function tightenTree(dir: string, tightened: Tightened[]): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      tighten(path, PRIVATE_DIR_MODE, tightened);
      tightenTree(path, tightened);
    } else if (entry.isFile()) {
      tighten(path, PRIVATE_FILE_MODE, tightened);
    }
  }
}

/** Files (that exist; others are skipped) made 0600 when anyone but their owner may read them. */
export function tightenFiles(paths: readonly string[]): Tightened[] {
  const tightened: Tightened[] = [];
  for (const path of paths) {
    try {
      tighten(path, PRIVATE_FILE_MODE, tightened);
    } catch (error) {
      // A path through a file is no file either; opening it says what is wrong.
      if ((error as NodeJS.ErrnoException).code !== "ENOTDIR") throw error;
    }
  }
  return tightened;
}

/** Sets `mode` when `path` lets anyone but its owner in; true when it did. */
function tighten(path: string, mode: number, tightened: Tightened[], follow = false): boolean {
  const stat = (follow ? statSync : lstatSync)(path, { throwIfNoEntry: false });
  if (!stat || stat.isSymbolicLink()) return false;
  const from = stat.mode & 0o777;
  if ((from & SHARED_BITS) === 0) return false;
  chmodSync(path, mode);
  tightened.push({ path, from, to: mode });
  return true;
}

/**
 * Creates `path` empty with mode 0600 unless it exists (then leaves it as it is). SQLite
 * gives its `-wal` and `-shm` files the mode of the database file, so a database made
 * this way keeps all three private.
 */
export function createPrivateFile(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, "wx", PRIVATE_FILE_MODE);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return;
    throw error;
  }
  try {
    fchmodSync(fd, PRIVATE_FILE_MODE);
  } finally {
    closeSync(fd);
  }
}

/** "0755", for log lines. */
export function octalMode(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, "0")}`;
}
