import {
  type APIError,
  apiErrorFrom,
  ConnectionError,
  TimeoutError,
  UnexpectedResponseError,
} from "./errors.ts";

export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface TransportOptions {
  baseUrl: string;
  apiKey: string;
  maxRetries: number;
  timeoutMs: number;
  fetch: FetchLike;
}

export interface CallOptions {
  method?: string;
  /** A path under the base URL (`/v1/jobs`), or an absolute URL (a presigned one). */
  path: string;
  query?: Record<string, string | number | undefined>;
  json?: unknown;
  body?: BodyInit;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /**
   * The caller reads the body as a stream: the timeout then covers only the wait for the
   * response headers, since an event stream legitimately stays open for minutes.
   */
  stream?: boolean;
  /** Absolute URLs (presigned) carry their own authorization: no bearer key on them. */
  auth?: boolean;
}

/** Statuses worth another try: the request may well succeed a moment later. */
const RETRY_STATUSES = new Set([408, 429, 500, 502, 503, 504]);
const BASE_DELAY_MS = 250;
const MAX_DELAY_MS = 8_000;
/** A `Retry-After` beyond this is not waited out: the caller is better told at once. */
const MAX_RETRY_AFTER_MS = 120_000;

/** Waits `ms`, or rejects with the signal's reason as soon as it is aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Full jitter: a random wait up to the exponential bound, so retrying clients spread out. */
export const backoffMs = (attempt: number): number =>
  Math.random() * Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** attempt);

/** `Retry-After` as seconds or an HTTP date, in milliseconds from now; null when absent. */
export function retryAfterMs(headers: Headers, now = Date.now()): number | null {
  const value = headers.get("retry-after");
  if (value === null) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/** Statuses whose response may not carry a body (the Response constructor refuses one). */
const NULL_BODY = new Set([204, 205, 304]);

/** `metadata.KEY=VALUE` query parameters, as `GET /v1/jobs` and `GET /v1/events` take them. */
export const metadataQuery = (metadata: Record<string, string> | undefined) =>
  Object.fromEntries(
    Object.entries(metadata ?? {}).map(([key, value]) => [`metadata.${key}`, value]),
  );

/**
 * HTTP with the SDK's policy: bearer auth, a timeout per attempt, and retries with
 * exponential backoff and jitter on connection errors, 408, 429 and 5xx, waiting at least
 * what `Retry-After` asks. Only `fetch` and `AbortSignal`: it runs on every runtime.
 */
export class Transport {
  constructor(readonly options: TransportOptions) {}

  url(path: string, query?: CallOptions["query"]): string {
    const url = new URL(
      /^https?:\/\//.test(path) ? path : this.options.baseUrl.replace(/\/+$/, "") + path,
    );
    for (const [key, value] of Object.entries(query ?? {}))
      if (value !== undefined) url.searchParams.set(key, String(value));
    return url.toString();
  }

  /** The response of a successful call (2xx/3xx); an `APIError` or `ConnectionError` otherwise. */
  async call(options: CallOptions): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      let failure: APIError | ConnectionError;
      let waitAtLeast = 0;
      try {
        const response = await this.once(options);
        if (response.ok || (response.status >= 300 && response.status < 400)) return response;
        const problem = await apiErrorFrom(response);
        if (!RETRY_STATUSES.has(problem.status)) throw problem;
        const after = retryAfterMs(response.headers);
        if (after !== null) {
          if (after > MAX_RETRY_AFTER_MS) throw problem;
          waitAtLeast = after;
        }
        failure = problem;
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        if (!(error instanceof ConnectionError)) throw error;
        failure = error;
      }
      if (attempt >= this.options.maxRetries) throw failure;
      await sleep(Math.max(waitAtLeast, backoffMs(attempt)), options.signal);
    }
  }

  async json<T>(options: CallOptions): Promise<T> {
    const response = await this.call(options);
    const text = await response.text();
    try {
      return JSON.parse(text) as T;
    } catch {
      const url = this.url(options.path, options.query);
      throw new UnexpectedResponseError(
        response.status,
        response.headers.get("content-type") ?? "",
        url,
      );
    }
  }

  /** One attempt: a fetch bounded by the timeout and the caller's signal. */
  private async once(options: CallOptions): Promise<Response> {
    const headers = new Headers(options.headers);
    if (options.auth !== false) headers.set("authorization", `Bearer ${this.options.apiKey}`);
    let body = options.body;
    if (options.json !== undefined) {
      headers.set("content-type", "application/json");
      body = JSON.stringify(options.json);
    }
    const timeout = new AbortController();
    const timer = setTimeout(
      () => timeout.abort(new TimeoutError(`request timed out after ${this.options.timeoutMs} ms`)),
      this.options.timeoutMs,
    );
    // A buffered call links the caller's signal by a listener it takes off when done, not by
    // AbortSignal.any: on Node 20 each call left a WeakRef in the caller's signal for that
    // signal's life, and a caller passes one signal to every call (gantry submit does, for
    // a whole run): about 60 bytes a request, for good. A stream's body outlives this call,
    // and the caller's abort must still end it, so a stream keeps AbortSignal.any.
    const caller = options.signal;
    const forward = () => timeout.abort(caller?.reason);
    let signal = timeout.signal;
    if (caller && options.stream) signal = AbortSignal.any([caller, timeout.signal]);
    else if (caller?.aborted) forward();
    else caller?.addEventListener("abort", forward, { once: true });
    try {
      const response = await this.options.fetch(this.url(options.path, options.query), {
        method: options.method ?? "GET",
        headers,
        ...(body !== undefined ? { body } : {}),
        signal,
        redirect: "follow",
      });
      if (options.stream) return response;
      // Buffer the body under the timeout, so a stalled body is retried like a stalled connect.
      const bytes = await response.arrayBuffer();
      return new Response(NULL_BODY.has(response.status) ? null : bytes, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (timeout.signal.aborted) throw timeout.signal.reason;
      throw new ConnectionError(`cannot reach ${this.options.baseUrl}: ${describe(error)}`, {
        cause: error,
      });
    } finally {
      clearTimeout(timer);
      caller?.removeEventListener("abort", forward);
    }
  }
}

const describe = (error: unknown): string => {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return error.message + cause;
};
