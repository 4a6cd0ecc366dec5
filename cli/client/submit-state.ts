import { createReadStream, existsSync, type WriteStream } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { cannotWrite, makeFolder } from "./out-folder.ts";

export const MANIFEST = ".gantry-submit.jsonl";

interface ManifestLine {
  key: string;
  job_id: string;
  file: string;
}

/**
 * What earlier runs of `gantry submit` into this `--out` submitted: one JSON line per job
 * (idempotency key → job id), appended as each job is made. A resumed run asks for those
 * jobs instead of uploading again. A line lost to a kill costs nothing: the same key is
 * refused with the earlier job's id, which is then adopted.
 */
export class SubmitState {
  private constructor(
    private readonly jobs: Map<string, string>,
    private readonly log: WriteStream,
  ) {}

  static async open(out: string): Promise<SubmitState> {
    makeFolder(out, "the --out folder");
    const path = join(out, MANIFEST);
    const jobs = new Map<string, string>();
    if (existsSync(path)) {
      for await (const line of createInterface({
        input: createReadStream(path),
        crlfDelay: Infinity,
      })) {
        try {
          const entry = JSON.parse(line) as ManifestLine;
          jobs.set(entry.key, entry.job_id);
        } catch {
          // A line cut short by a kill: its job is found again by its key.
        }
      }
    }
    // Opened here, so a folder this user cannot write is said before any upload.
    const handle = await open(path, "a").catch((error: unknown) => {
      throw cannotWrite("the --out folder", out, error);
    });
    return new SubmitState(jobs, handle.createWriteStream());
  }

  jobFor(key: string): string | undefined {
    return this.jobs.get(key);
  }

  /** How many jobs earlier runs recorded. */
  get size(): number {
    return this.jobs.size;
  }

  record(key: string, jobId: string, file: string): void {
    this.jobs.set(key, jobId);
    this.log.write(`${JSON.stringify({ key, job_id: jobId, file } satisfies ManifestLine)}\n`);
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.log.end(resolve));
  }
}
