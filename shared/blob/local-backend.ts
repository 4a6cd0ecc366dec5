/**
 * What the gateway's `/v1/blobs` routes need from a store whose bytes the gateway serves
 * itself (the `disk` adapter today). Runtime-free: the routes run on Workers too.
 */
export interface LocalBlobBackend {
  /**
   * Stores `body` under `key`, replacing any previous blob only once the whole body has
   * arrived (a failed write leaves the old blob, or none, in place). Counts bytes while
   * streaming and rejects with a `BlobWriteError` as soon as the body passes `maxBytes`, or
   * at the end when `sizeBytes` is set and the body has another length.
   */
  write(
    key: string,
    body: ReadableStream<Uint8Array>,
    meta: BlobWriteMeta,
  ): Promise<{ sizeBytes: number }>;
  /** The stored blob as a stream, or null when there is none. Cancel the body if unused. */
  read(key: string): Promise<LocalBlob | null>;
}

/**
 * What the gateway's `/v1/blobs` routes serve a local backend with. Here, beside the
 * backend, so the gateway's context can name it without importing the routes.
 */
export interface BlobRouteDeps {
  backend: LocalBlobBackend;
  /** The same secret the store signs with. */
  secret: string;
  /** Clock in milliseconds, injectable for tests. */
  now?: () => number;
}

export interface BlobWriteMeta {
  contentType: string;
  maxBytes: number;
  /** Exact expected size, when the upload URL was signed for one. */
  sizeBytes?: number;
}

export interface LocalBlob {
  body: ReadableStream<Uint8Array>;
  sizeBytes: number;
  contentType: string;
}

export type BlobWriteErrorCode = "too_large" | "too_small" | "unreadable_body" | "invalid_key";

/** A write refused because of what the client sent: the routes answer 4xx, never 500. */
export class BlobWriteError extends Error {
  override readonly name = "BlobWriteError";
  constructor(
    readonly code: BlobWriteErrorCode,
    message: string,
  ) {
    super(message);
  }
}

const MAX_KEY_LENGTH = 1024;

/**
 * Why `key` cannot name a stored file, or null when it is safe. Keys are `/`-separated
 * segments such as `inputs/upl_x` or `outputs/job_x/result.json`. Refused: empty or
 * leading/trailing/double slashes (absolute paths), segments starting with `.` (`.`,
 * `..`, and the store's own hidden temp and sidecar files), backslashes (a separator on
 * Windows) and control characters including NUL.
 */
export function blobKeyProblem(key: string): string | null {
  if (key.length === 0) return "key is empty";
  if (key.length > MAX_KEY_LENGTH) return `key is longer than ${MAX_KEY_LENGTH} characters`;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing them is the point
  if (/[\u0000-\u001f\u007f]/.test(key)) return "key contains a control character";
  if (key.includes("\\")) return "key contains a backslash";
  for (const segment of key.split("/")) {
    if (segment.length === 0) return "key has an empty path segment or a leading slash";
    if (segment.startsWith(".")) return "key has a path segment starting with '.'";
  }
  return null;
}

export function assertSafeBlobKey(key: string): void {
  const problem = blobKeyProblem(key);
  if (problem !== null)
    throw new BlobWriteError("invalid_key", `unsafe blob key ${JSON.stringify(key)}: ${problem}`);
}

/** A failing body stream is the client's doing (abort, reset), not a server fault. */
export async function readBodyChunk(
  reader: ReadableStreamDefaultReader<Uint8Array>,
): Promise<Uint8Array | null> {
  try {
    const { done, value } = await reader.read();
    return done ? null : value;
  } catch (error) {
    if (error instanceof BlobWriteError) throw error;
    throw new BlobWriteError("unreadable_body", `upload body could not be read: ${String(error)}`);
  }
}
