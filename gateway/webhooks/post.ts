import { linkSignals } from "../../shared/abort-link.ts";
import type { WebhookAttemptReason } from "../../shared/protocol/webhook-api.ts";
import type { WebhookHeaders } from "./sign.ts";

/**
 * One HTTP attempt at a webhook. It never throws: every way an attempt can go wrong (an
 * error status, a refused connection, a timeout) comes back as data to record.
 *
 * What is recorded is what the tenant may read (`GET /v1/jobs/{id}/webhooks`): a reason from
 * a fixed set and a fixed sentence for it, or for an answer its status and an excerpt of the
 * receiver's own body. How a connection failed (`connect ECONNREFUSED 10.0.0.5:443`, what a
 * name resolved to and why the address policy refused it) is the operator's: it travels in
 * `detail`, which the caller logs and never stores, so the log cannot map internal names
 * and addresses for a tenant.
 */
export interface PostResult {
  /** The HTTP status, or null when no response arrived. */
  statusCode: number | null;
  /** Null on 2xx; otherwise why, from a fixed set. */
  reason: WebhookAttemptReason | null;
  /** Null on 2xx; otherwise a short, single-line sentence, free of network details. */
  error: string | null;
  /** The `Retry-After` header of a 429 or 503, as sent (the schedule parses it). */
  retryAfter?: string;
  /** For the gateway's log only (never stored or shown to the tenant): the network error. */
  detail?: string;
}

/** Receivers' bodies are theirs: keep only enough to tell an operator what went wrong. */
const BODY_EXCERPT_BYTES = 256;
const MAX_ERROR_CHARS = 300;

export async function postWebhook(
  fetchFn: typeof fetch,
  url: string,
  body: string,
  headers: WebhookHeaders,
  limits: { timeoutMs: number; stopping?: AbortSignal },
): Promise<PostResult> {
  const { timeoutMs, stopping } = limits;
  const timeout = AbortSignal.timeout(timeoutMs);
  // Not AbortSignal.any: linked to `stopping`, which lives as long as the gateway, each
  // attempt left a WeakRef behind on it for good (shared/abort-link.ts).
  const link = linkSignals(timeout, stopping);
  try {
    return await attempt(fetchFn, url, body, headers, link.signal, {
      timeout,
      timeoutMs,
      stopping,
    });
  } finally {
    link.dispose();
  }
}

async function attempt(
  fetchFn: typeof fetch,
  url: string,
  body: string,
  headers: WebhookHeaders,
  signal: AbortSignal,
  limits: { timeout: AbortSignal; timeoutMs: number; stopping?: AbortSignal | undefined },
): Promise<PostResult> {
  const { timeout, timeoutMs, stopping } = limits;
  let response: Response;
  try {
    response = await fetchFn(url, {
      method: "POST",
      headers: {
        ...headers,
        "content-type": "application/json",
        "user-agent": "Gantry-Webhooks/1",
      },
      body,
      // A redirect is a failure: following it could send the signed event somewhere the
      // tenant never registered (or to an internal address).
      redirect: "manual",
      // Covers the response body too: a receiver that stalls mid-body is cut off as well.
      signal,
    });
  } catch (error) {
    if (stopping?.aborted && !timeout.aborted) {
      return {
        statusCode: null,
        reason: "timeout",
        error: CUT_SHORT,
        detail: describeError(error),
      };
    }
    return fetchFailure(error, timeoutMs);
  }
  if (response.status >= 200 && response.status < 300) {
    // Release the connection without reading what the receiver sent.
    await response.body?.cancel().catch(() => {});
    return { statusCode: response.status, reason: null, error: null };
  }
  const excerpt = await readExcerpt(response.body, BODY_EXCERPT_BYTES);
  const location = response.headers.get("location");
  let reason = `HTTP ${response.status}`;
  if (response.status >= 300 && response.status < 400) {
    reason += ` redirect not followed${location ? ` (to ${location})` : ""}`;
  }
  if (excerpt) reason += `: ${excerpt}`;
  const retryAfter = response.headers.get("retry-after");
  // Only these two statuses mean "come back later"; elsewhere the header is noise.
  const honoured = (response.status === 429 || response.status === 503) && retryAfter;
  return {
    statusCode: response.status,
    reason: "http_status",
    error: shorten(reason),
    ...(honoured ? { retryAfter: retryAfter.slice(0, 64) } : {}),
  };
}

/** An attempt the gateway's shutdown ended before its receiver answered. */
export const CUT_SHORT = "cut short: the gateway stopped before the receiver answered";

/** The sentence recorded for each reason a request got no answer. */
export const NO_ANSWER_ERRORS = {
  connection_failed: "could not connect to the receiver",
  tls_error: "the TLS handshake with the receiver failed",
  refused_by_policy:
    "not sent: the receiver's address is not allowed by the gateway's address policy",
} as const satisfies Partial<Record<WebhookAttemptReason, string>>;

/** A request that got no answer: its reason and sentence to record, the error to log. */
export function fetchFailure(error: unknown, timeoutMs: number): PostResult {
  const reason = classifyFetchError(error);
  // The attempt's own limit, or one of the connection's (connect, headers, body).
  const ownLimit = causes(error).some((e) => (e as { name?: unknown }).name === "TimeoutError");
  const timedOut = ownLimit ? `timed out after ${timeoutMs} ms` : "timed out";
  return {
    statusCode: null,
    reason,
    error: reason === "timeout" ? timedOut : NO_ANSWER_ERRORS[reason],
    detail: describeError(error),
  };
}

/** undici's `TypeError: fetch failed` carries what went wrong in `cause` (maybe nested). */
function causes(error: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let at = error; at !== undefined && at !== null && chain.length < 5; ) {
    chain.push(at);
    at = (at as { cause?: unknown }).cause;
  }
  return chain;
}

const TIMEOUT_CODES = new Set([
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "ETIMEDOUT",
]);

/** OpenSSL's certificate verdicts, as Node names them. */
const CERTIFICATE_CODES =
  /^(CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_(GET|VERIFY|DECRYPT)|ERR_TLS_|ERR_SSL_|HOSTNAME_MISMATCH|INVALID_CA|INVALID_PURPOSE)/;

export function classifyFetchError(
  error: unknown,
): "timeout" | "connection_failed" | "tls_error" | "refused_by_policy" {
  const chain = causes(error);
  const field = (value: unknown, key: "name" | "code" | "message") => {
    const found = (value as Record<string, unknown> | null)?.[key];
    return typeof found === "string" ? found : "";
  };
  // The safe fetch's own refusal (shared/net/safe-fetch.ts ForbiddenAddressError).
  if (chain.some((e) => field(e, "code") === "ERR_WEBHOOK_ADDRESS_FORBIDDEN")) {
    return "refused_by_policy";
  }
  if (
    chain.some((e) => field(e, "name") === "TimeoutError" || TIMEOUT_CODES.has(field(e, "code")))
  ) {
    return "timeout";
  }
  if (
    chain.some(
      (e) =>
        CERTIFICATE_CODES.test(field(e, "code")) ||
        // Workers and other runtimes say it in words only.
        /\b(certificate|TLS|SSL)\b/i.test(field(e, "message")),
    )
  ) {
    return "tls_error";
  }
  return "connection_failed";
}

/** The whole chain in one bounded line, for the log. */
function describeError(error: unknown): string {
  const parts = causes(error).map((e) => {
    if (e instanceof Error || e instanceof DOMException) {
      const code = (e as { code?: unknown }).code;
      return `${e.name}${typeof code === "string" ? ` ${code}` : ""}: ${e.message}`;
    }
    return String(e);
  });
  return shorten(parts.join(" <- "));
}

/** Reads at most `maxBytes` of a body, then cancels the rest of the stream. */
async function readExcerpt(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
): Promise<string> {
  if (!body) return "";
  const reader = body.getReader();
  const bytes = new Uint8Array(maxBytes);
  let size = 0;
  try {
    while (size < maxBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      const take = Math.min(value.byteLength, maxBytes - size);
      bytes.set(value.subarray(0, take), size);
      size += take;
    }
  } catch {
    // A body that fails to arrive (timeout, reset) just means no excerpt.
  } finally {
    await reader.cancel().catch(() => {});
  }
  return new TextDecoder().decode(bytes.subarray(0, size));
}

/** One line, bounded: the error column is for people reading a delivery log. */
function shorten(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping them is the point
  const line = text.replace(/[\u0000-\u001f\u007f]+/g, " ").trim();
  return line.length > MAX_ERROR_CHARS ? `${line.slice(0, MAX_ERROR_CHARS - 1)}…` : line;
}
