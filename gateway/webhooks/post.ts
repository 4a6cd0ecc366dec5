import type { WebhookHeaders } from "./sign.ts";

/**
 * One HTTP attempt at a webhook. It never throws: every way an attempt can go wrong (an
 * error status, a refused connection, a timeout) comes back as data to record.
 */
export interface PostResult {
  /** The HTTP status, or null when no response arrived. */
  statusCode: number | null;
  /** Null on 2xx; otherwise a short, single-line reason. */
  error: string | null;
  /** The `Retry-After` header of a 429 or 503, as sent (the schedule parses it). */
  retryAfter?: string;
}

/** Receivers' bodies are theirs: keep only enough to tell an operator what went wrong. */
const BODY_EXCERPT_BYTES = 256;
const MAX_ERROR_CHARS = 300;

export async function postWebhook(
  fetchFn: typeof fetch,
  url: string,
  body: string,
  headers: WebhookHeaders,
  timeoutMs: number,
): Promise<PostResult> {
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
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    return { statusCode: null, error: describeFetchError(error, timeoutMs) };
  }
  if (response.status >= 200 && response.status < 300) {
    // Release the connection without reading what the receiver sent.
    await response.body?.cancel().catch(() => {});
    return { statusCode: response.status, error: null };
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
    error: shorten(reason),
    ...(honoured ? { retryAfter: retryAfter.slice(0, 64) } : {}),
  };
}

function describeFetchError(error: unknown, timeoutMs: number): string {
  if (error instanceof Error || error instanceof DOMException) {
    if (error.name === "TimeoutError") return `timed out after ${timeoutMs} ms`;
    // undici hides the useful part (ECONNREFUSED, DNS failure) in `cause`.
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : "";
    return shorten(cause ? `${error.message}: ${cause}` : error.message);
  }
  return shorten(String(error));
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
