/**
 * HMAC-signed, expiring blob URLs for the `disk` BlobStore, served by the gateway.
 *
 * Runtime-free: Web Crypto (`crypto.subtle`) only, so the same code signs on Node and
 * verifies in Cloudflare workerd.
 *
 * URL shape:
 *   `${baseUrl}/v1/blobs/${encodeURIComponent(key)}?method=PUT&ct=<type>&size=<n>&exp=<s>&sig=<mac>`
 *   `${baseUrl}/v1/blobs/${encodeURIComponent(key)}?method=GET&exp=<s>&sig=<mac>`
 * where a PUT carries either `size` (exact bytes) or `max` (upper bound), `exp` is unix
 * seconds and `sig` is base64url (no padding) HMAC-SHA256 over the canonical string:
 *
 *   gantry-blob-v1 \n METHOD \n enc(key) \n enc(content type or "") \n bound \n exp
 *
 * with `enc` = encodeURIComponent (so no field can smuggle a newline into the next one)
 * and `bound` = `size:<n>`, `max:<n>` or "" for GET. The version prefix keeps these MACs
 * from ever being valid for another purpose that shares the secret.
 */

export type BlobMethod = "PUT" | "GET";

/** What a valid URL allows: the route acts on this, never on raw query parameters. */
export interface BlobGrant {
  method: BlobMethod;
  key: string;
  /** PUT only: the Content-Type the body must be sent with. */
  contentType: string | null;
  /** PUT only: exact body size, when known in advance. */
  sizeBytes: number | null;
  /** PUT only: upper bound on the body when the exact size is unknown. */
  maxBytes: number | null;
  expiresAt: Date;
}

export interface SignBlobUrlInput {
  baseUrl: string;
  secret: string;
  method: BlobMethod;
  key: string;
  expiresAt: Date;
  contentType?: string;
  sizeBytes?: number;
  maxBytes?: number;
}

export type BlobVerification =
  | { ok: true; grant: BlobGrant }
  | { ok: false; status: 400 | 403 | 413 | 415; reason: string };

export interface VerifyBlobRequestInput {
  /** The full request URL, as received. */
  url: string | URL;
  /** The HTTP method of the request (HEAD is allowed by a GET URL). */
  method: string;
  secret: string;
  /** The request's Content-Type header (checked on PUT). */
  contentType?: string | null;
  /** The request's raw Content-Length header, checked before any body byte is read. */
  contentLength?: string | null;
  /** Clock in milliseconds, injectable for tests. */
  now?: number;
}

const PREFIX = "gantry-blob-v1";
const PATH_MARKER = "/v1/blobs/";
const INTEGER = /^(0|[1-9][0-9]{0,15})$/;
const SIGNED_PARAMS = ["method", "ct", "size", "max", "exp", "sig"] as const;
const encoder = new TextEncoder();

/** Refuses secrets too short to make a forged signature impractical to guess. */
export function assertUsableSecret(secret: string): void {
  if (secret.length < 16) throw new Error("blob signing secret must be at least 16 characters");
}

export async function signBlobUrl(input: SignBlobUrlInput): Promise<string> {
  const exp = Math.floor(input.expiresAt.getTime() / 1000);
  const grant = grantFromInput(input, exp);
  const sig = toBase64Url(await hmac(input.secret, canonicalString(grant, exp)));
  const params = new URLSearchParams({ method: grant.method });
  if (grant.contentType !== null) params.set("ct", grant.contentType);
  if (grant.sizeBytes !== null) params.set("size", String(grant.sizeBytes));
  if (grant.maxBytes !== null) params.set("max", String(grant.maxBytes));
  params.set("exp", String(exp));
  params.set("sig", sig);
  const base = input.baseUrl.replace(/\/+$/, "");
  return `${base}${PATH_MARKER}${encodeURIComponent(input.key)}?${params}`;
}

/**
 * Checks a request against its signed URL: signature, expiry, method, content type and
 * declared length, in that order, so a forged URL learns nothing beyond "403".
 */
export async function verifyBlobRequest(input: VerifyBlobRequestInput): Promise<BlobVerification> {
  const parsed = parseSignedUrl(new URL(input.url));
  if (!parsed.ok) return parsed;
  const { grant, exp, sig } = parsed;

  // Compare the text, not decoded bytes: base64 has spare bits in its last character, and
  // two spellings of one MAC would make "change one character" tampering pass unnoticed.
  const expected = toBase64Url(await hmac(input.secret, canonicalString(grant, exp)));
  if (!constantTimeEqual(encoder.encode(sig), encoder.encode(expected))) {
    return deny(403, "signature does not match");
  }
  if ((input.now ?? Date.now()) >= grant.expiresAt.getTime()) {
    return deny(403, `URL expired at ${grant.expiresAt.toISOString()}`);
  }
  const method = input.method.toUpperCase();
  const allowed = grant.method === "GET" ? method === "GET" || method === "HEAD" : method === "PUT";
  if (!allowed) return deny(403, `method not allowed: this URL is signed for ${grant.method}`);
  if (grant.method === "GET") return { ok: true, grant };

  const contentType = input.contentType?.trim() ?? "";
  if (contentType !== grant.contentType) {
    return deny(415, `content-type must be ${grant.contentType}`);
  }
  const lengthProblem = checkDeclaredLength(input.contentLength ?? null, grant);
  return lengthProblem ?? { ok: true, grant };
}

/** Reason text for a body of the wrong size, shared with the streaming check. */
export function sizeReason(grant: BlobGrant): string {
  return grant.sizeBytes !== null
    ? `body must be exactly ${grant.sizeBytes} bytes`
    : `body exceeds ${grant.maxBytes} bytes`;
}

function checkDeclaredLength(header: string | null, grant: BlobGrant): BlobVerification | null {
  if (header === null) return null; // chunked: the route enforces the bound while streaming
  if (!INTEGER.test(header.trim())) return deny(400, "Content-Length must be a whole number");
  const length = Number(header.trim());
  if (grant.sizeBytes !== null && length !== grant.sizeBytes) {
    return deny(length > grant.sizeBytes ? 413 : 400, sizeReason(grant));
  }
  if (grant.maxBytes !== null && length > grant.maxBytes) return deny(413, sizeReason(grant));
  return null;
}

type ParsedUrl =
  | { ok: true; grant: BlobGrant; exp: number; sig: string }
  | { ok: false; status: 403; reason: string };

function parseSignedUrl(url: URL): ParsedUrl {
  const at = url.pathname.indexOf(PATH_MARKER);
  if (at < 0) return deny(403, "not a blob URL");
  let key: string;
  try {
    key = decodeURIComponent(url.pathname.slice(at + PATH_MARKER.length));
  } catch {
    return deny(403, "signature does not match");
  }
  // A repeated parameter could be read one way here and another way by a proxy.
  for (const name of SIGNED_PARAMS) {
    if (url.searchParams.getAll(name).length > 1) return deny(403, `repeated parameter ${name}`);
  }
  const q = (name: (typeof SIGNED_PARAMS)[number]) => url.searchParams.get(name);
  const method = q("method");
  const expText = q("exp");
  if ((method !== "PUT" && method !== "GET") || expText === null || !INTEGER.test(expText)) {
    return deny(403, "URL is not signed (missing or malformed method or exp)");
  }
  const sizeText = q("size");
  const maxText = q("max");
  const badBound = [sizeText, maxText].some((v) => v !== null && !INTEGER.test(v));
  if (badBound || (sizeText !== null && maxText !== null)) {
    return deny(403, "signature does not match");
  }
  const exp = Number(expText);
  const grant: BlobGrant = {
    method,
    key,
    contentType: q("ct"),
    sizeBytes: sizeText === null ? null : Number(sizeText),
    maxBytes: maxText === null ? null : Number(maxText),
    expiresAt: new Date(exp * 1000),
  };
  return { ok: true, grant, exp, sig: q("sig") ?? "" };
}

function grantFromInput(input: SignBlobUrlInput, exp: number): BlobGrant {
  const expiresAt = new Date(exp * 1000);
  if (input.method === "GET") {
    return {
      method: "GET",
      key: input.key,
      contentType: null,
      sizeBytes: null,
      maxBytes: null,
      expiresAt,
    };
  }
  if (!input.contentType) throw new Error("a PUT URL needs a content type");
  const size = input.sizeBytes ?? null;
  const max = size === null ? (input.maxBytes ?? null) : null;
  if (size === null && max === null) throw new Error("a PUT URL needs sizeBytes or maxBytes");
  for (const n of [size, max]) {
    if (n !== null && (!Number.isSafeInteger(n) || n < 0)) {
      throw new Error(`byte count must be a non-negative integer, got ${n}`);
    }
  }
  return {
    method: "PUT",
    key: input.key,
    contentType: input.contentType,
    sizeBytes: size,
    maxBytes: max,
    expiresAt,
  };
}

function canonicalString(grant: BlobGrant, exp: number): string {
  const bound =
    grant.sizeBytes !== null
      ? `size:${grant.sizeBytes}`
      : grant.maxBytes !== null
        ? `max:${grant.maxBytes}`
        : "";
  return [
    PREFIX,
    grant.method,
    encodeURIComponent(grant.key),
    encodeURIComponent(grant.contentType ?? ""),
    bound,
    String(exp),
  ].join("\n");
}

async function hmac(secret: string, message: string): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
}

/** Compares every byte whatever the first difference, so timing reveals nothing. */
function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] ?? 0) ^ (b[i] ?? 0);
  return diff === 0;
}

function toBase64Url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replaceAll("=", "");
}

function deny<S extends 400 | 403 | 413 | 415>(status: S, reason: string) {
  return { ok: false as const, status, reason };
}
