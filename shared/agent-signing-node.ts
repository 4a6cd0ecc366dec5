/**
 * The agent-signing primitives on node:crypto (Node only; Workers keep the Web Crypto
 * default in agent-signing.ts). Synchronous: no key import, no promise per operation,
 * which is what the agent and the Node gateway pay on every internal request.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import type { AgentCrypto } from "./agent-signing.ts";
import { pooledRandomBytes } from "./random-pool.ts";

const NONCE_BYTES = 16;

export const nodeAgentCrypto = {
  sha256Hex: (data) => createHash("sha256").update(data).digest("hex"),
  hmacSha256Base64: (secret, text) => createHmac("sha256", secret).update(text).digest("base64"),
  timingSafeEqual: (a, b) => a.byteLength === b.byteLength && timingSafeEqual(a, b),
  nonce: () => pooledRandomBytes(NONCE_BYTES).toString("hex"),
} satisfies AgentCrypto;
