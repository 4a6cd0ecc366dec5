/**
 * How an agent signs its requests to the gateway's internal API, and how the gateway
 * checks them. Runtime-free (Web Crypto only), so the gateway on Workers, the gateway on
 * Node and the agent share this one file.
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

const encoder = new TextEncoder();

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

export async function sha256Hex(body: Uint8Array | string): Promise<string> {
  const bytes = typeof body === "string" ? encoder.encode(body) : body;
  const digest = await crypto.subtle.digest("SHA-256", bytes as BufferSource);
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

function hmacKey(secret: string, usage: "sign" | "verify"): Promise<CryptoKey> {
  return crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    [usage],
  );
}

/** The base64 signature of a request. */
export async function agentSignature(secret: string, parts: SignedRequestParts): Promise<string> {
  const key = await hmacKey(secret, "sign");
  const mac = await crypto.subtle.sign("HMAC", key, encoder.encode(canonicalRequest(parts)));
  return btoa(String.fromCharCode(...new Uint8Array(mac)));
}

/**
 * Whether `signature` (base64) is this request's. Web Crypto's `verify` compares in
 * constant time, so a forger learns nothing from how long a refusal takes.
 */
export async function verifyAgentSignature(
  secret: string,
  parts: SignedRequestParts,
  signature: string,
): Promise<boolean> {
  let mac: Uint8Array;
  try {
    mac = Uint8Array.from(atob(signature), (char) => char.charCodeAt(0));
  } catch {
    return false;
  }
  if (mac.byteLength !== 32) return false;
  const key = await hmacKey(secret, "verify");
  return crypto.subtle.verify(
    "HMAC",
    key,
    mac as BufferSource,
    encoder.encode(canonicalRequest(parts)),
  );
}

/** 16 random bytes, hex: unique enough that a repeat can only be a replay. */
export function newNonce(): string {
  return [...crypto.getRandomValues(new Uint8Array(16))]
    .map((byte) => byte.toString(16).padStart(2, "0"))
    .join("");
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
}

/** The four `gantry-*` headers for one request. Sign every try afresh: nonces are single-use. */
export async function signAgentRequest(
  options: SignRequestOptions,
): Promise<Record<string, string>> {
  const timestamp = Math.floor((options.now ?? Date.now()) / 1000);
  const nonce = options.nonce ?? newNonce();
  const path = new URL(options.url, "http://path.invalid").pathname;
  const signature = await agentSignature(options.secret, {
    method: options.method,
    path,
    timestamp,
    nonce,
    bodySha256: await sha256Hex(options.body),
  });
  return {
    [AGENT_HEADERS.agentId]: options.agentId,
    [AGENT_HEADERS.timestamp]: String(timestamp),
    [AGENT_HEADERS.nonce]: nonce,
    [AGENT_HEADERS.signature]: signature,
  };
}
