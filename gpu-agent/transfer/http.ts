import type { IncomingHttpHeaders } from "node:http";
import { Agent, type Dispatcher, interceptors } from "undici";

/**
 * The agent's HTTP client, for the gateway's internal API and for presigned transfers.
 *
 * By default it dispatches straight onto undici's keep-alive connection pools and collects
 * the answer in memory. The global `fetch` works too, but its WHATWG layer (Request,
 * Response, web streams, an abort signal and its timer per call) costs more CPU than a
 * loopback exchange itself, and so does undici's stream-based `request`; an agent makes
 * three calls per job. An injected `fetch` (tests, an in-process gateway) is still
 * honoured, with the same limits.
 */
export interface HttpCall {
  method: "GET" | "POST" | "PUT";
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Deadline for the whole exchange, answer body included. */
  timeoutMs: number;
  /** Gives up on the exchange early (a long poll whose consumer stopped). */
  signal?: AbortSignal;
  /**
   * Follow redirects, as fetch does: downloads from a client's URL may be redirected. The
   * gateway's signed calls are never redirected by undici: a signed request is not resent
   * to wherever a 3xx points. (An injected fetch follows its own rules.)
   */
  followRedirects?: boolean;
  /**
   * The most bytes a successful (2xx) answer may have; a longer one fails the call with
   * `BodyTooLargeError`, as soon as its `content-length` or its bytes say so. Default 16 MiB.
   */
  maxBodyBytes?: number;
}

export interface HttpAnswer {
  status: number;
  header(name: string): string | null;
  /**
   * The whole body, in an array of its own (nothing of a pooled buffer around it). An
   * error answer's body is cut at 64 KiB: only a problem+json `code` is read from it.
   */
  body: Uint8Array;
  /** The body as UTF-8 text. */
  text(): string;
}

export type Http = (url: string, call: HttpCall) => Promise<HttpAnswer>;

/** A 2xx answer longer than the call's `maxBodyBytes`. */
export class BodyTooLargeError extends Error {
  override name = "BodyTooLargeError";
  constructor(readonly maxBytes: number) {
    super(`the answer is larger than ${maxBytes} bytes`);
  }
}

const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;
const ERROR_BODY_BYTES = 64 * 1024;
/** As fetch: up to 20 redirects. */
const MAX_REDIRECTS = 20;

const decoder = new TextDecoder();
const ok = (status: number) => status >= 200 && status <= 299;
const timeoutError = () => new DOMException("The operation timed out.", "TimeoutError");
const abortError = () => new DOMException("The operation was aborted.", "AbortError");

let shared: { plain: Dispatcher; redirecting: Dispatcher } | null = null;

/**
 * One keep-alive pool per origin for the whole process: the gateway, and (on the embedded
 * gateway) its blob routes, are one origin, so a job's claim, download and report reuse
 * the same few sockets. Made on first use so importing this file opens nothing.
 */
function dispatchers() {
  if (!shared) {
    // undici's default idle timeout (4 s, or less when the server says so in keep-alive).
    const agent = new Agent();
    shared = {
      plain: agent,
      redirecting: agent.compose(interceptors.redirect({ maxRedirections: MAX_REDIRECTS })),
    };
  }
  return shared;
}

/** The default client: undici's dispatcher, with the answer collected by a small handler. */
export const undiciHttp: Http = (url, call) => {
  const { plain, redirecting } = dispatchers();
  return dispatchCall(call.followRedirects ? redirecting : plain, url, call);
};

/**
 * A client on a dispatcher of its own (the input URL client's checked one). Redirects are
 * the caller's business: `followRedirects` is ignored.
 */
export const dispatcherHttp =
  (dispatcher: Dispatcher): Http =>
  (url, call) =>
    dispatchCall(dispatcher, url, call);

function dispatchCall(dispatcher: Dispatcher, url: string, call: HttpCall): Promise<HttpAnswer> {
  const { origin, pathname, search } = new URL(url);
  return new Promise((resolve, reject) => {
    const collector = new Collector(call, resolve, reject);
    try {
      dispatcher.dispatch(
        {
          origin,
          path: `${pathname}${search}`,
          method: call.method,
          headers: call.headers ?? {},
          body: call.body ?? null,
        },
        collector,
      );
    } catch (error) {
      collector.fail(error instanceof Error ? error : new Error(String(error)));
    }
  });
}

/**
 * Gathers one answer into memory and settles the call once: with the answer, or with the
 * first of a network error, the deadline, or a body over the limit. What fails the call
 * also aborts the request, which closes its connection.
 */
class Collector implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private failure: Error | null = null;
  private settled = false;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private chunks: Buffer[] = [];
  private size = 0;
  private limit = ERROR_BODY_BYTES;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly call: HttpCall,
    private readonly resolve: (answer: HttpAnswer) => void,
    private readonly reject: (error: Error) => void,
  ) {
    this.timer = setTimeout(() => this.fail(timeoutError()), call.timeoutMs);
    if (call.signal?.aborted) this.fail(abortError());
    // Removed once settled: one signal may outlive many calls (a consumer's long polls).
    call.signal?.addEventListener("abort", this.onAbort, { once: true });
  }

  private readonly onAbort = () => this.fail(abortError());

  private settle(): void {
    this.settled = true;
    clearTimeout(this.timer);
    this.call.signal?.removeEventListener("abort", this.onAbort);
  }

  fail(error: Error): void {
    if (this.settled) return;
    this.settle();
    this.failure = error;
    this.reject(error);
    if (this.controller && !this.controller.aborted) this.controller.abort(error);
  }

  /** Once per try (and per redirect hop); a call that failed before it started stops here. */
  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.failure) controller.abort(this.failure);
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.status = status;
    this.headers = headers;
    this.limit = ok(status) ? (this.call.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES) : ERROR_BODY_BYTES;
    if (ok(status) && Number(headers["content-length"]) > this.limit) {
      this.fail(new BodyTooLargeError(this.limit));
    }
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    const room = this.limit - this.size;
    if (chunk.byteLength <= room) {
      this.size += chunk.byteLength;
      this.chunks.push(chunk);
    } else if (ok(this.status)) {
      this.fail(new BodyTooLargeError(this.limit));
    } else if (room > 0) {
      this.size += room;
      this.chunks.push(chunk.subarray(0, room));
    }
  }

  onResponseEnd(): void {
    if (this.settled) return;
    this.settle();
    this.resolve(new Answer(this.status, this.headers, joinChunks(this.chunks, this.size)));
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.fail(error);
  }
}

/** An undici answer; a class, so that answering makes no closures. */
class Answer implements HttpAnswer {
  constructor(
    readonly status: number,
    private readonly headers: IncomingHttpHeaders,
    readonly body: Uint8Array,
  ) {}

  header(name: string): string | null {
    const value = this.headers[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(", ") : value;
  }

  text(): string {
    return decoder.decode(this.body);
  }
}

/** One array of exactly `size` bytes: what goes to the runner child is the body alone. */
function joinChunks(chunks: readonly Uint8Array[], size: number): Uint8Array {
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

/** A client on an injected `fetch` (tests, an in-process gateway), with the same limits. */
export function fetchHttp(doFetch: typeof fetch): Http {
  return async (url, call) => {
    const response = await doFetch(url, {
      method: call.method,
      ...(call.headers ? { headers: call.headers } : {}),
      ...(call.body !== undefined ? { body: call.body as BodyInit } : {}),
      signal: call.signal
        ? AbortSignal.any([call.signal, AbortSignal.timeout(call.timeoutMs)])
        : AbortSignal.timeout(call.timeoutMs),
    });
    const limit = response.ok ? (call.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES) : ERROR_BODY_BYTES;
    if (response.ok && Number(response.headers.get("content-length")) > limit) {
      await response.body?.cancel().catch(() => {});
      throw new BodyTooLargeError(limit);
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    // Leaving the loop early (a throw, a break) cancels the stream, closing the connection.
    for await (const chunk of response.body ?? emptyBody()) {
      if (chunk.byteLength > limit - size) {
        if (response.ok) throw new BodyTooLargeError(limit);
        chunks.push(chunk.subarray(0, limit - size));
        size = limit;
        break;
      }
      size += chunk.byteLength;
      chunks.push(chunk);
    }
    const body = joinChunks(chunks, size);
    return {
      status: response.status,
      header: (name) => response.headers.get(name),
      body,
      text: () => decoder.decode(body),
    };
  };
}

async function* emptyBody(): AsyncIterable<Uint8Array> {}

/** The injected `fetch` when there is one, else undici. */
export const httpFor = (doFetch: typeof fetch | undefined): Http =>
  doFetch ? fetchHttp(doFetch) : undiciHttp;
