import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { UserError } from "../shared/errors.ts";
import { PRIVATE_FILE_MODE } from "../shared/private-files.ts";

/**
 * One `gantry start` per data directory. A second one on the same folder (a terminal left
 * running, `npm start` again) opened the same SQLite database and ran its in-process agent
 * under the same agent id and secret as the first: two agents the gateway took for one,
 * each taking the other's jobs and answering for its heartbeats, so a job of one that died
 * waited for its lease. The second now stops at once and says where the first runs.
 *
 * Hand-written rather than proper-lockfile: what matters on one machine is whether the
 * process that wrote the file still runs, which a pid says at once; a lock held by file
 * times would refuse a restart for its staleness period after the first was killed.
 */
const FILE = "gantry.pid";

interface Holder {
  pid: number;
  url: string;
}

/** Claims the data directory for this process; throws when another live one holds it. */
export function lockDataDir(dataDir: string, url: string): { release(): void } {
  const path = join(dataDir, FILE);
  const text = `${JSON.stringify({ pid: process.pid, url } satisfies Holder)}\n`;
  // Created exclusively, so two starts at the same moment cannot both take it; a file left
  // by a process that no longer runs is replaced.
  for (let tries = 0; ; tries++) {
    try {
      writeFileSync(path, text, { mode: PRIVATE_FILE_MODE, flag: "wx" });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || tries > 0) throw error;
      const holder = holderOf(path);
      if (holder && holder.pid !== process.pid && isRunning(holder.pid)) {
        throw new UserError(
          `another gantry start (pid ${holder.pid}, ${holder.url}) is using the data directory ${dataDir}: stop it first, or give this one its own GANTRY_DATA_DIR`,
        );
      }
      rmSync(path, { force: true });
    }
  }
  return {
    release() {
      // Only our own: a successor may have claimed it after a forced exit.
      if (holderOf(path)?.pid === process.pid) rmSync(path, { force: true });
    },
  };
}

function holderOf(path: string): Holder | null {
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, "utf8"));
    if (typeof parsed !== "object" || parsed === null) return null;
    const { pid, url } = parsed as Partial<Holder>;
    return typeof pid === "number" && typeof url === "string" ? { pid, url } : null;
  } catch {
    return null; // none, or unreadable: nobody holds it
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
