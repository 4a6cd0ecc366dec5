import { randomBytes } from "node:crypto";

/**
 * Random bytes from the CSPRNG drawn a page at a time and handed out in slices, each used
 * once (Node only). A `randomBytes` call per nonce cost more than the work the nonce was
 * for: an agent request's HMAC, an event id's AES-GCM (node's randomUUID pools alike).
 */
const PAGE_BYTES = 4096;
let page = Buffer.alloc(0);
let offset = 0;

/** `length` fresh random bytes (at most a page), never handed out before. */
export function pooledRandomBytes(length: number): Buffer {
  if (offset + length > page.byteLength) {
    page = randomBytes(PAGE_BYTES);
    offset = 0;
  }
  offset += length;
  return page.subarray(offset - length, offset);
}
