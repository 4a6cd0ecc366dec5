/**
 * How an agent signs its requests to the gateway's internal API, and how the gateway
 * checks them. Runtime-free: the primitives come from an `AgentCrypto`, Web Crypto by
 * default, so the gateway on Workers, the gateway on Node and the agent share this one
 * file. Node callers pass `nodeAgentCrypto` (agent-signing-node.ts): node:crypto answers
 * synchronously, without Web Crypto's key import and promise per operation, which is most
 * of what signing cost per job.
 *
 * Four headers travel with every signed request:
 *
 * - `gantry-agent-id`: the agent's id (`agt_…`);
 * - `gantry-timestamp`: unix seconds when it was signed;
 * - `gantry-nonce`: random, never reused;
 * - `gantry-signature`: base64 HMAC-SHA256, keyed with the agent's secret (its UTF-8
 *   bytes), over `v1\n{METHOD}\n{path}\n{timestamp}\n{nonce}\n{hex SHA-256 of the body}`.
 *
 * The path is the URL's pathname as the gateway receives it, without the query. The body
 * hash covers the exact bytes sent (an empty body hashes the empty string).
 */
import { toHex } from "./hex.ts";

export const AGENT_HEADERS = {
  agentId: "gantry-agent-id",
  timestamp: "gantry-timestamp",
  nonce: "gantry-nonce",
  signature: "gantry-signature",
} as const;

/** A request signed further from the gateway's clock than this is refused as stale. */
export const SIGNATURE_WINDOW_SECONDS = 5 * 60;

/** What a signature covers, besides the secret. */
export interface SignedRequestParts {
  method: string;
  path: string;
  /** Unix seconds. */
  timestamp: number;
  nonce: string;
  /** Lowercase hex SHA-256 of the body bytes. */
  bodySha256: string;
}

/**
 * The primitives signing needs. An implementation may answer synchronously (node:crypto)
 * or with promises (Web Crypto); callers await either.
 */
export interface AgentCrypto {
  /** Lowercase hex SHA-256 of the bytes (a string: of its UTF-8 bytes). */
  sha256Hex(data: Uint8Array | string): string | Promise<string>;
  /** Base64 HMAC-SHA256 of `text`'s UTF-8 bytes, keyed with `secret`'s UTF-8 bytes. */
  hmacSha256Base64(secret: string, text: string): string | Promise<string>;
  /**
   * Whether two byte strings of the same length are equal, in a time that does not depend
   * on where they differ, so a forger learns nothing from how long a refusal takes.
   */
  timingSafeEqual(a: Uint8Array, b: Uint8Array): boolean;
  /** 16 random bytes, hex: unique enough that a repeat can only be a replay. */
  nonce(): string;
}

const encoder = new TextEncoder();

/**
 * Imported HMAC keys by secret: importing is the dearest part of a Web Crypto HMAC, and a
 * gateway sees the same few agents over and over. Bounded, oldest out first, so a fleet that
 * churns through agents cannot grow it without end.
 */
const KEY_CACHE_SIZE = 256;
const hmacKeys = new Map<string, Promise<CryptoKey>>();

function hmacKey(secret: string): Promise<CryptoKey> {
  const cached = hmacKeys.get(secret);
  if (cached) return cached;
  const key = crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  // A failed import is not kept: the next call tries again.
  key.catch(() => hmacKeys.delete(secret));
  if (hmacKeys.size >= KEY_CACHE_SIZE) hmacKeys.delete(hmacKeys.keys().next().value as string);
  hmacKeys.set(secret, key);
  return key;
}

/** Web Crypto (`crypto.subtle`): there on Workers, in browsers and on Node alike. */
export const webAgentCrypto: AgentCrypto = {
  async sha256Hex(data) {
    const bytes = typeof data === "string" ? encoder.encode(data) : data;
    return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as BufferSource)));
  },
  async hmacSha256Base64(secret, text) {
    const mac = await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(text));
    return btoa(String.fromCharCode(...new Uint8Array(mac)));
  },
  timingSafeEqual(a, b) {
    if (a.byteLength !== b.byteLength) return false;
    let diff = 0;
    for (let i = 0; i < a.byteLength; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
    return diff === 0;
  },
  nonce: () => toHex(crypto.getRandomValues(new Uint8Array(16))),
};

/** The exact text the HMAC is computed over. */
export function canonicalRequest(parts: SignedRequestParts): string {
  return [
    "v1",
    parts.method.toUpperCase(),
    parts.path,
    String(parts.timestamp),
    parts.nonce,
    parts.bodySha256,
  ].join("\n");
}

export async function sha256Hex(
  body: Uint8Array | string,
  impl: AgentCrypto = webAgentCrypto,
): Promise<string> {
  return impl.sha256Hex(body);
}

/** The base64 signature of a request. */
export async function agentSignature(
  secret: string,
  parts: SignedRequestParts,
  impl: AgentCrypto = webAgentCrypto,
): Promise<string> {
  return impl.hmacSha256Base64(secret, canonicalRequest(parts));
}

/** Base64 to bytes; null when it is not base64. */
function fromBase64(text: string): Uint8Array | null {
  try {
    return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
  } catch {
    return null;
  }
}

/**
 * Whether `signature` (base64) is this request's, compared in constant time (see
 * `AgentCrypto`). Signers send the canonical spelling, which is compared as it is; any
 * other base64 spelling of the same 32 bytes is decoded and passes too.
 */
export async function verifyAgentSignature(
  secret: string,
  parts: SignedRequestParts,
  signature: string,
  impl: AgentCrypto = webAgentCrypto,
): Promise<boolean> {
  const expected = await agentSignature(secret, parts, impl);
  if (impl.timingSafeEqual(encoder.encode(signature), encoder.encode(expected))) return true;
  const given = fromBase64(signature);
  if (given?.byteLength !== 32) return false;
  const wanted = fromBase64(expected);
  return wanted !== null && impl.timingSafeEqual(given, wanted);
}

export interface SignRequestOptions {
  agentId: string;
  secret: string;
  method: string;
  /** The full URL or just its path; only the pathname is signed. */
  url: string;
  /** The body exactly as sent. */
  body: string | Uint8Array;
  /** Milliseconds since the epoch; `Date.now()` by default. */
  now?: number;
  nonce?: string;
  /** The primitives; Web Crypto by default. */
  crypto?: AgentCrypto;
}

/** The four `gantry-*` headers for one request. Sign every try afresh: nonces are single-use. */
export async function signAgentRequest(
  options: SignRequestOptions,
): Promise<Record<string, string>> {
  const impl = options.crypto ?? webAgentCrypto;
  const timestamp = Math.floor((options.now ?? Date.now()) / 1000);
  const nonce = options.nonce ?? impl.nonce();
  const signature = await agentSignature(
    options.secret,
    {
      method: options.method,
      path: new URL(options.url, "http://path.invalid").pathname,
      timestamp,
      nonce,
      bodySha256: await impl.sha256Hex(options.body),
    },
    impl,
  );
  return {
    [AGENT_HEADERS.agentId]: options.agentId,
    [AGENT_HEADERS.timestamp]: String(timestamp),
    [AGENT_HEADERS.nonce]: nonce,
    [AGENT_HEADERS.signature]: signature,
  };
}
