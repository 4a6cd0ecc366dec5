/**
 * Random bytes for ids (job ids, trace and span ids), drawn from one pool that Web Crypto
 * refills 4 KiB at a time: `crypto.getRandomValues` costs a call into the runtime's CSPRNG
 * whatever the size, and a submit draws three small ids (measured: 4% of the Node gateway's
 * CPU under load went to those calls). The bytes are the CSPRNG's all the same. Secrets
 * (API keys, signing keys) do not come from here: they are drawn on their own, never kept.
 */
const POOL_BYTES = 4096;
let pool = new Uint8Array(0);
let used = 0;

/** `bytes` fresh random bytes (at most 4 KiB), a copy the caller owns. */
export function randomIdBytes(bytes: number): Uint8Array {
  if (used + bytes > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(POOL_BYTES));
    used = 0;
  }
  const out = pool.slice(used, used + bytes);
  used += bytes;
  return out;
}
