import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HttpProblem } from "../../shared/errors.ts";
import type { Gateway } from "../context.ts";

const decoder = new TextDecoder();

/** The 413 every JSON route answers for a body over the limit. */
export const bodyTooLarge = (maxBytes: number, what = "Bodies") =>
  new HttpProblem(
    413,
    "body_too_large",
    "Body too large",
    `${what} may be at most ${maxBytes} bytes.`,
  );

/** A body limit: its bytes, its 413, and Hono's streaming check for bodies of no declared length. */
function bodyBound(maxBytes: number, what?: string) {
  const tooLarge = () => bodyTooLarge(maxBytes, what);
  const streamed = bodyLimit({
    maxSize: maxBytes,
    onError: (c) => {
      // The rest of the body is never read: the connection cannot carry another request, so
      // say so rather than let the client reuse a socket the server will drop mid-request.
      c.header("connection", "close");
      throw tooLarge();
    },
  });
  return { maxBytes, tooLarge, streamed };
}

/** Hono's body cache. Its type says values; it stores promises. */
type BodyCache = Record<string, unknown>;

/**
 * The JSON routes' body limit. A body that declares its length is refused above the limit
 * before a byte is read; with a runtime reader, it is then read once from the runtime's
 * request and handed to Hono's body cache (as bytes and as text), because building a Web
 * Request only to read a few hundred bytes of JSON was a large share of each request's
 * cost on Node. Anything else (chunked bodies, Workers) goes through Hono's own limit.
 */
export function jsonBodyLimit(gateway: Gateway): MiddlewareHandler {
  const plain = bodyBound(gateway.config.maxBodyBytes);
  // A batch carries up to 1 000 items: its own limit, and a 413 that says what to do.
  const batch = bodyBound(
    gateway.config.maxBatchBodyBytes,
    "A batch's body (send its items in more batches)",
  );
  return async (c, next) => {
    const method = c.req.method;
    const bound = method === "POST" && c.req.path === "/v1/batches" ? batch : plain;
    const { maxBytes, tooLarge } = bound;
    const streamed = () => bound.streamed(c, next);
    const declared = c.req.header("content-length");
    if (method === "GET" || method === "HEAD" || declared === undefined) return streamed();
    if (c.req.header("transfer-encoding") !== undefined) return streamed();
    const length = Number(declared);
    if (length > maxBytes) {
      c.header("connection", "close");
      throw tooLarge();
    }
    const bytes = gateway.readRawBody?.(c.env, maxBytes);
    if (bytes) primeBodyCache(c.req.bodyCache, bytes);
    return next();
  };
}

/**
 * Hono caches body promises by kind and, asked for one kind after another, re-reads through
 * a new Response; both kinds the routes use are primed from the one read. A failed read
 * rejects whoever asks, and nobody else.
 */
function primeBodyCache(cache: BodyCache, bytes: Promise<Uint8Array>): void {
  const buffer = bytes.then((body) =>
    body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength),
  );
  buffer.catch(() => {});
  cache.arrayBuffer = buffer;
  primeBodyText(cache, bytes);
}

/**
 * Caches the body's text, decoded from bytes already read, unless it is cached already:
 * asked for text after the bytes, Hono would otherwise decode through a new Response.
 */
export function primeBodyText(cache: BodyCache, bytes: Uint8Array | Promise<Uint8Array>): void {
  if (cache.text) return;
  const text = Promise.resolve(bytes).then((body) => decoder.decode(body));
  text.catch(() => {});
  cache.text = text;
}
