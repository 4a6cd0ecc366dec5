import { rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { Gantry, type TypedJob } from "../../client/index.ts";
import { UserError } from "../../shared/errors.ts";
import { cannotWrite, makeFolder } from "./out-folder.ts";

/** The CLI's client: `GANTRY_URL` and `GANTRY_KEY`, as the `npm start` banner exports them. */
export function clientFromEnv(
  env: NodeJS.ProcessEnv,
  options: { maxRetries?: number } = {},
): Gantry {
  const apiKey = env.GANTRY_KEY;
  if (!apiKey) throw new UserError("GANTRY_KEY is not set (the API key `npm start` prints)");
  const baseUrl = env.GANTRY_URL || "http://127.0.0.1:8787";
  if (!URL.canParse(baseUrl) || !/^https?:$/.test(new URL(baseUrl).protocol))
    throw new UserError(
      `GANTRY_URL must be the gateway's http(s) URL, such as http://127.0.0.1:8787 (got ${JSON.stringify(baseUrl)})`,
    );
  return new Gantry({
    baseUrl,
    apiKey,
    maxRetries: options.maxRetries ?? 4,
  });
}

/** `--param key=value`, repeatable: values that parse as JSON (numbers, booleans) are typed. */
export function collectParam(
  pair: string,
  previous: Record<string, unknown> = {},
): Record<string, unknown> {
  const eq = pair.indexOf("=");
  if (eq <= 0) throw new UserError(`--param ${pair}: expected key=value`);
  const key = pair.slice(0, eq);
  const raw = pair.slice(eq + 1);
  let value: unknown = raw;
  try {
    value = JSON.parse(raw);
  } catch {
    // A plain string.
  }
  return { ...previous, [key]: value };
}

const EXTENSIONS: Record<string, string> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/webp": "webp",
  "application/json": "json",
  "text/plain": "txt",
};

interface ArtifactRef {
  content_type: string;
  size_bytes?: number;
  base64?: string;
}

/** Output keys that name an artifact (a binary result stored beside the JSON output). */
export function artifactsOf(output: unknown): [string, ArtifactRef][] {
  if (typeof output !== "object" || output === null) return [];
  return Object.entries(output).filter(
    (entry): entry is [string, ArtifactRef] =>
      typeof entry[1] === "object" &&
      entry[1] !== null &&
      typeof (entry[1] as ArtifactRef).content_type === "string",
  );
}

/** Writes through a temporary name, so a killed run never leaves a half file that looks done. */
export async function writeAtomic(path: string, data: string | Uint8Array): Promise<void> {
  makeFolder(dirname(path));
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    await writeFile(temporary, data);
    await rename(temporary, path);
  } catch (error) {
    throw cannotWrite("the file", path, error);
  }
}

/** Saves each artifact of a succeeded job as `base.name.ext`; returns the paths written. */
export async function saveArtifacts(
  gantry: Gantry,
  job: TypedJob,
  base: string,
): Promise<string[]> {
  const written: string[] = [];
  for (const [name, ref] of artifactsOf(job.output)) {
    const path = `${base}.${name}.${EXTENSIONS[ref.content_type] ?? "bin"}`;
    const bytes = ref.base64
      ? Uint8Array.from(atob(ref.base64), (c) => c.charCodeAt(0))
      : new Uint8Array(await (await gantry.artifacts.download(job, name)).arrayBuffer());
    await writeAtomic(path, bytes);
    written.push(path);
  }
  return written;
}

/** The output without inline artifact bytes (they are written as files instead). */
export function outputWithoutBytes(output: unknown): unknown {
  if (typeof output !== "object" || output === null) return output;
  return Object.fromEntries(
    Object.entries(output).map(([key, value]) => {
      if (typeof value !== "object" || value === null || !("base64" in value)) return [key, value];
      const { base64: _bytes, ...rest } = value as ArtifactRef;
      return [key, rest];
    }),
  );
}

/** A failed job's exit status: 1, with its error code on stderr for scripts to read. */
export const JOB_FAILED_EXIT = 1;

/** Ctrl-C: a message of what was left, and the shell's exit status for SIGINT (128 + 2). */
export class Interrupted extends UserError {
  override readonly name: string = "Interrupted";
  readonly exitCode: number = 130;
}

/** `gantry run --max-wait`: gave up waiting; 124, as timeout(1) exits, so scripts can tell. */
export class GaveUpWaiting extends Interrupted {
  override readonly name: string = "GaveUpWaiting";
  override readonly exitCode: number = 124;
}
