/**
 * The `disk` BlobStore: blobs are files under `root`, and clients and agents reach them
 * through the gateway's `/v1/blobs` routes behind HMAC-signed, expiring URLs (see
 * `signed-url.ts`). It is the embedded default, so `npm start` needs no object store.
 *
 * Layout: the key `outputs/job_x/result.json` is the file `<root>/outputs/job_x/result.json`
 * with its content type in the hidden sidecar `<root>/outputs/job_x/.result.json.meta.json`.
 * Keys may not have segments starting with `.`, so no key can name a sidecar or temp file.
 */
import { randomUUID } from "node:crypto";
import {
  type FileHandle,
  mkdir,
  open,
  readFile,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import path from "node:path";
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from "../private-files.ts";
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

export interface DiskBlobStoreOptions extends Omit<GatewayPresignerOptions, "checkKey"> {
  /** Folder holding the blobs; created on first write. */
  root: string;
}

const READ_CHUNK_BYTES = 64 * 1024;
const FALLBACK_CONTENT_TYPE = "application/octet-stream";

interface Sidecar {
  v: 1;
  contentType: string;
  sizeBytes: number;
}

export function createDiskBlobStore(options: DiskBlobStoreOptions): BlobStore & LocalBlobBackend {
  const root = path.resolve(options.root);

  function filePath(key: string): string {
    assertSafeBlobKey(key);
    const full = path.resolve(root, ...key.split("/"));
    // Belt and braces: the key rules already keep us inside root.
    if (!full.startsWith(root + path.sep))
      throw new BlobWriteError("invalid_key", `key ${key} escapes the root`);
    return full;
  }

  return {
    ...createGatewayPresigner({ ...options, checkKey: filePath }),

    async head(key: string): Promise<BlobHead | null> {
      const file = filePath(key);
      const info = await ifExists(stat(file));
      if (!info?.isFile()) return null;
      const sidecar = await readSidecar(file);
      return { sizeBytes: info.size, contentType: sidecar?.contentType ?? null };
    },

    async delete(key: string): Promise<void> {
      const file = filePath(key);
      // Data first: once it is gone the blob is gone, whatever happens to the sidecar.
      await ifExists(rm(file, { force: true }));
      await ifExists(rm(sidecarPath(file), { force: true }));
    },

    async write(key: string, body: ReadableStream<Uint8Array>, meta: BlobWriteMeta) {
      return writeBlob(filePath(key), body, meta);
    },

    async read(key: string): Promise<LocalBlob | null> {
      const file = filePath(key);
      const handle = await ifExists(open(file, "r"));
      if (handle === null) return null;
      try {
        const info = await handle.stat();
        if (!info.isFile()) {
          await handle.close();
          return null;
        }
        const sidecar = await readSidecar(file);
        const contentType = sidecar?.contentType ?? FALLBACK_CONTENT_TYPE;
        return { body: fileStream(handle), sizeBytes: info.size, contentType };
      } catch (error) {
        await handle.close();
        throw error;
      }
    },
  };
}

/**
 * Streams `body` into a temp file beside the target, counting bytes, then renames it into
 * place, so readers see the old blob or the whole new one, never a torn write.
 */
async function writeBlob(
  file: string,
  body: ReadableStream<Uint8Array>,
  meta: BlobWriteMeta,
): Promise<{ sizeBytes: number }> {
  const limit = Math.min(meta.maxBytes, meta.sizeBytes ?? Number.POSITIVE_INFINITY);
  const dir = path.dirname(file);
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const temp = path.join(dir, `.${path.basename(file)}.${randomUUID()}.tmp`);
  const reader = body.getReader();
  let handle: FileHandle | null = null;
  try {
    // Readable by the gateway's user only (the umask can only narrow it further).
    handle = await open(temp, "wx", PRIVATE_FILE_MODE);
    let size = 0;
    for (;;) {
      const chunk = await readBodyChunk(reader);
      if (chunk === null) break;
      size += chunk.byteLength;
      if (size > limit) throw new BlobWriteError("too_large", `body exceeds ${limit} bytes`);
      await writeAll(handle, chunk);
    }
    if (meta.sizeBytes !== undefined && size !== meta.sizeBytes) {
      throw new BlobWriteError(
        "too_small",
        `body must be exactly ${meta.sizeBytes} bytes, got ${size}`,
      );
    }
    await handle.datasync(); // the job is only "stored" once the bytes survive a crash
    await handle.close();
    handle = null;
    const sidecar: Sidecar = { v: 1, contentType: meta.contentType, sizeBytes: size };
    await writeAtomically(sidecarPath(file), JSON.stringify(sidecar));
    await rename(temp, file);
    return { sizeBytes: size };
  } catch (error) {
    await handle?.close().catch(() => {});
    await rm(temp, { force: true }).catch(() => {});
    await reader.cancel(error).catch(() => {});
    throw error;
  }
}

async function writeAll(handle: FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.byteLength) {
    const { bytesWritten } = await handle.write(chunk, offset, chunk.byteLength - offset);
    offset += bytesWritten;
  }
}

async function writeAtomically(file: string, text: string): Promise<void> {
  const temp = `${file}.${randomUUID()}.tmp`;
  try {
    await writeFile(temp, text, { flag: "wx", mode: PRIVATE_FILE_MODE });
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => {});
    throw error;
  }
}

function sidecarPath(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.meta.json`);
}

async function readSidecar(file: string): Promise<Sidecar | null> {
  const text = await ifExists(readFile(sidecarPath(file), "utf8"));
  if (text === null) return null;
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && "contentType" in parsed) {
      const { contentType } = parsed;
      if (typeof contentType === "string") return parsed as Sidecar;
    }
  } catch {
    // A damaged sidecar only loses the content type; the bytes are still served.
  }
  return null;
}

/** Streams an open file in fixed chunks, closing it at the end or on cancel. */
function fileStream(handle: FileHandle): ReadableStream<Uint8Array> {
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close();
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const buffer = new Uint8Array(READ_CHUNK_BYTES);
        const { bytesRead } = await handle.read(buffer, 0, buffer.byteLength, null);
        if (bytesRead === 0) {
          await close();
          controller.close();
          return;
        }
        controller.enqueue(buffer.subarray(0, bytesRead));
      } catch (error) {
        await close().catch(() => {});
        controller.error(error);
      }
    },
    cancel: close,
  });
}

/** Resolves to null when the path (or a folder above it) does not exist. */
async function ifExists<T>(operation: Promise<T>): Promise<T | null> {
  try {
    return await operation;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw error;
  }
}
