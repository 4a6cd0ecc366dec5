/**
 * The `r2` BlobStore for the Workers gateway: blobs live in an R2 bucket binding, and
 * clients and agents reach them through the gateway's `/v1/blobs` routes behind the same
 * HMAC-signed, expiring URLs as the `disk` store (see `signed-url.ts`). Only the gateway
 * holds the binding; nobody else needs R2 credentials.
 *
 * Runtime-free apart from one optional Workers global: `FixedLengthStream` lets an upload
 * of a signed exact size stream straight into R2 (whose `put` needs a known length). Where
 * it is missing, or the size is only bounded (agent outputs: small JSON), the body is
 * buffered up to its bound first.
 */
import {
  assertSafeBlobKey,
  BlobWriteError,
  type BlobWriteMeta,
  type LocalBlob,
  type LocalBlobBackend,
  readBodyChunk,
} from "./local-backend.ts";
import type { BlobHead, BlobStore } from "./port.ts";
import { createGatewayPresigner, type GatewayPresignerOptions } from "./presign.ts";

/** The slice of an R2 object's metadata this store reads. */
export interface R2ObjectLike {
  size: number;
  httpMetadata?: { contentType?: string };
}

export interface R2ObjectBodyLike extends R2ObjectLike {
  body: ReadableStream<Uint8Array>;
}

/** The slice of the Workers `R2Bucket` binding this store uses, so no Workers types leak. */
export interface R2BucketLike {
  head(key: string): Promise<R2ObjectLike | null>;
  get(key: string): Promise<R2ObjectBodyLike | null>;
  put(
    key: string,
    value: ReadableStream<Uint8Array> | Uint8Array,
    options: { httpMetadata: { contentType: string } },
  ): Promise<unknown>;
  delete(key: string): Promise<void>;
}

export interface R2BlobStoreOptions extends GatewayPresignerOptions {
  bucket: R2BucketLike;
}

const FALLBACK_CONTENT_TYPE = "application/octet-stream";

type FixedLengthStreamCtor = new (length: number) => TransformStream<Uint8Array, Uint8Array>;

export function createR2BlobStore(options: R2BlobStoreOptions): BlobStore & LocalBlobBackend {
  const { bucket } = options;
  return {
    ...createGatewayPresigner(options),

    async head(key: string): Promise<BlobHead | null> {
      assertSafeBlobKey(key);
      const object = await bucket.head(key);
      if (object === null) return null;
      return { sizeBytes: object.size, contentType: object.httpMetadata?.contentType ?? null };
    },

    async delete(key: string): Promise<void> {
      assertSafeBlobKey(key);
      await bucket.delete(key);
    },

    async write(key: string, body: ReadableStream<Uint8Array>, meta: BlobWriteMeta) {
      assertSafeBlobKey(key);
      const FixedLength = fixedLengthStream();
      // An empty FixedLengthStream is "complete" before the body is read: buffer that case.
      if (meta.sizeBytes !== undefined && meta.sizeBytes > 0 && FixedLength !== null) {
        return writeExact(bucket, key, body, meta, meta.sizeBytes, FixedLength);
      }
      const bytes = await readAll(body, limitOf(meta));
      checkExactSize(bytes.byteLength, meta);
      await bucket.put(key, bytes, { httpMetadata: { contentType: meta.contentType } });
      return { sizeBytes: bytes.byteLength };
    },

    async read(key: string): Promise<LocalBlob | null> {
      assertSafeBlobKey(key);
      const object = await bucket.get(key);
      if (object === null) return null;
      const contentType = object.httpMetadata?.contentType ?? FALLBACK_CONTENT_TYPE;
      return { body: object.body, sizeBytes: object.size, contentType };
    },
  };
}

/**
 * Streams a body of a signed exact size into R2. R2's `put` is atomic: if the body turns
 * out too long or too short the stream is aborted, the put fails, and the old blob (or
 * none) stays, just as the disk store's rename-into-place guarantees.
 */
async function writeExact(
  bucket: R2BucketLike,
  key: string,
  body: ReadableStream<Uint8Array>,
  meta: BlobWriteMeta,
  size: number,
  FixedLength: FixedLengthStreamCtor,
): Promise<{ sizeBytes: number }> {
  const { readable, writable } = new FixedLength(size);
  const writer = writable.getWriter();
  const storing = bucket.put(key, readable, { httpMetadata: { contentType: meta.contentType } });
  // When our own check fails, its 4xx reason must win over R2's echo of the aborted stream.
  const ours: { failure: BlobWriteError | null } = { failure: null };
  // R2 commits as soon as it has `size` bytes, before the stream closes: so the last chunk
  // is held back until the body has ended, lest a too-long body store its first `size` bytes.
  const pumping = (async () => {
    const held: Uint8Array[] = [];
    const total = await forEachChunk(body, limitOf(meta), async (chunk) => {
      if (chunk.byteLength === 0) return; // an empty chunk must not release the held one
      const previous = held.pop();
      if (previous) await writer.write(previous);
      held.push(chunk);
    });
    checkExactSize(total, meta);
    const last = held.pop();
    if (last) await writer.write(last);
    await writer.close();
  })().catch((error: unknown) => {
    if (error instanceof BlobWriteError) ours.failure = error;
    throw error;
  });
  try {
    await Promise.all([pumping, storing]);
  } catch (error) {
    // Aborting fails the put (nothing is stored) and frees a write stuck on backpressure.
    await writer.abort(error).catch(() => {});
    pumping.catch(() => {});
    storing.catch(() => {});
    throw ours.failure ?? error;
  }
  return { sizeBytes: size };
}

/** Reads the whole body, refusing it as soon as it passes `limit` bytes. */
async function readAll(body: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const total = await forEachChunk(body, limit, (chunk) => {
    chunks.push(chunk);
  });
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

/** Hands each chunk on while counting; returns the byte count. Cancels the body on failure. */
async function forEachChunk(
  body: ReadableStream<Uint8Array>,
  limit: number,
  use: (chunk: Uint8Array) => unknown,
): Promise<number> {
  const reader = body.getReader();
  let size = 0;
  try {
    for (;;) {
      const chunk = await readBodyChunk(reader);
      if (chunk === null) return size;
      size += chunk.byteLength;
      if (size > limit) throw new BlobWriteError("too_large", `body exceeds ${limit} bytes`);
      await use(chunk);
    }
  } catch (error) {
    await reader.cancel(error).catch(() => {});
    throw error;
  }
}

function limitOf(meta: BlobWriteMeta): number {
  return Math.min(meta.maxBytes, meta.sizeBytes ?? Number.POSITIVE_INFINITY);
}

function checkExactSize(size: number, meta: BlobWriteMeta): void {
  if (meta.sizeBytes !== undefined && size !== meta.sizeBytes) {
    throw new BlobWriteError(
      "too_small",
      `body must be exactly ${meta.sizeBytes} bytes, got ${size}`,
    );
  }
}

/** Workers' `FixedLengthStream`, looked up at run time so this file needs no Workers types. */
function fixedLengthStream(): FixedLengthStreamCtor | null {
  const ctor = (globalThis as { FixedLengthStream?: FixedLengthStreamCtor }).FixedLengthStream;
  return typeof ctor === "function" ? ctor : null;
}
