/**
 * Prefixed, sortable ids (`job_…`, `upl_…`): 10 characters of time then 16 of randomness,
 * Crockford base32 in lowercase, like ULID. Runtime-free: Web Crypto only.
 */
import { randomIdBytes } from "./random-bytes.ts";

const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz";

export type IdPrefix = "job" | "upl" | "ten" | "key" | "whd" | "agt" | "bat";

export function newId(prefix: IdPrefix, now = Date.now()): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const random = randomIdBytes(16);
  let tail = "";
  for (const byte of random) tail += ALPHABET[byte % 32];
  return `${prefix}_${time}${tail}`;
}

/**
 * `count` ids of one instant in ascending order, so that things made together (a batch's
 * jobs) list in the order they were given: ids of one instant differ only in their random
 * part, which alone would order them by chance.
 */
export function newIds(prefix: IdPrefix, count: number, now = Date.now()): string[] {
  return Array.from({ length: count }, () => newId(prefix, now)).sort();
}

/** A random secret token, base64url, for API keys and signing secrets. */
export function randomToken(bytes = 24): string {
  const raw = crypto.getRandomValues(new Uint8Array(bytes));
  return btoa(String.fromCharCode(...raw))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replaceAll("=", "");
}
