/**
 * The agent-signing primitives on node:crypto (Node only; Workers keep the Web Crypto
 * default in agent-signing.ts). Synchronous: no key import, no promise per operation,
 * which is what the agent and the Node gateway pay on every internal request.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { AgentCrypto } from "./agent-signing.ts";

/**
 * Random bytes drawn from the CSPRNG a page at a time and handed out 16 at a time: one
 * `randomBytes` call per request cost more than the HMAC (node's randomUUID pools alike).
 */
const NONCE_BYTES = 16;
let pool = Buffer.alloc(0);
let offset = 0;

function nonce(): string {
  if (offset + NONCE_BYTES > pool.byteLength) {
    pool = randomBytes(4096);
    offset = 0;
  }
  offset += NONCE_BYTES;
  return pool.toString("hex", offset - NONCE_BYTES, offset);
}

export const nodeAgentCrypto = {
  sha256Hex: (data) => createHash("sha256").update(data).digest("hex"),
  hmacSha256Base64: (secret, text) => createHmac("sha256", secret).update(text).digest("base64"),
  timingSafeEqual: (a, b) => a.byteLength === b.byteLength && timingSafeEqual(a, b),
  nonce,
} satisfies AgentCrypto;
