import { MAX_INLINE_INPUT_BYTES } from "../../shared/protocol/agent.ts";
import type { Gateway } from "../context.ts";

/**
 * An upload small enough to travel inside the claim (`data_base64`), so the agent skips a
 * round trip per job: for a model that runs in a millisecond, the download is a large part
 * of a job's cost. Only where this gateway holds the bytes itself (disk, R2); behind S3, or
 * when the upload is larger than `limit`, missing or unreadable, the claim carries the
 * presigned URL alone, as before, and the agent downloads it.
 */
export async function inlineUpload(
  gateway: Pick<Gateway, "localBlobs" | "log">,
  key: string,
  limit = MAX_INLINE_INPUT_BYTES,
): Promise<{ data_base64: string; content_type: string } | null> {
  const backend = gateway.localBlobs?.backend;
  if (!backend || limit <= 0) return null;
  try {
    const blob = await backend.read(key);
    if (!blob) return null;
    if (blob.sizeBytes > limit) {
      await blob.body.cancel();
      return null;
    }
    const bytes = await readAtMost(blob.body, limit);
    if (!bytes) return null;
    return { data_base64: toBase64(bytes), content_type: blob.contentType };
  } catch (error) {
    // The URL still works (or fails the job the way it always did).
    gateway.log.warn({ err: error, key }, "could not read an upload to inline it; sending its URL");
    return null;
  }
}

/** The whole stream, or null (cancelled) as soon as it passes `limit` bytes. */
async function readAtMost(
  body: ReadableStream<Uint8Array>,
  limit: number,
): Promise<Uint8Array | null> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

/** Base64 with the Web's `btoa` (the gateway runs on Workers too, without Node's Buffer). */
function toBase64(bytes: Uint8Array): string {
  let binary = "";
  // In slices: spreading 64 KiB of arguments at once would overflow the call stack.
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}
