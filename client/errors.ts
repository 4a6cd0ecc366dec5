import type { Job, JobError, Problem } from "../shared/protocol/index.ts";

/** Every error the SDK throws is one of these, so a caller can catch them all at once. */
export class GantryError extends Error {
  override name = "GantryError";
}

/** One `{path, message}` of a `422` problem: which field of the request was wrong. */
export interface FieldError {
  path: string;
  message: string;
}

/**
 * The gateway answered with an error status: the RFC 9457 problem+json body, with its
 * stable `code` to branch on (`rate_limited`, `invalid_input`, `queue_full`, …).
 */
export class APIError extends GantryError {
  override name = "APIError";
  readonly code: string;
  readonly errors: FieldError[];
  constructor(
    readonly status: number,
    readonly problem: Problem,
    readonly headers: Headers,
  ) {
    super(`${status} ${problem.code}: ${problem.detail ?? problem.title}`);
    this.code = problem.code;
    this.errors = problem.errors ?? [];
  }
}

/**
 * `410 resume_window_exceeded` on `gantry.events({ lastEventId })`: the cursor is older than
 * the gateway keeps (an hour). Changes since may be lost: read the jobs' state (`jobs.list`,
 * `batches.jobs`), then open `events()` again without `lastEventId`.
 */
export class ResumeWindowError extends APIError {
  override name = "ResumeWindowError";
  constructor(cause: APIError) {
    super(cause.status, cause.problem, cause.headers);
    this.message = `the event stream cannot resume that far back: ${this.message}`;
  }
}

/** The gateway could not be reached (refused, reset, DNS) after every retry. */
export class ConnectionError extends GantryError {
  override name = "ConnectionError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A request took longer than `timeoutMs` (each attempt is timed on its own). */
export class TimeoutError extends ConnectionError {
  override name = "TimeoutError";
}

/** The job ended without succeeding: `failed`, `canceled` or `expired`, with its `error`. */
export class JobFailedError extends GantryError {
  override name = "JobFailedError";
  /** The job's error code (`invalid_image`, …), or its status when it has no error. */
  readonly code: string;
  readonly error: JobError | null;
  constructor(readonly job: Job) {
    super(
      job.error
        ? `job ${job.id} ${job.status}: ${job.error.code}: ${job.error.message}`
        : `job ${job.id} ${job.status}`,
    );
    this.error = job.error;
    this.code = job.error?.code ?? job.status;
  }
}

/**
 * A success whose body is not the gateway's JSON: the base URL names another server (a web
 * app, a proxy's or captive portal's page, the console's address instead of the API's).
 */
export class UnexpectedResponseError extends GantryError {
  override name = "UnexpectedResponseError";
  constructor(
    readonly status: number,
    readonly contentType: string,
    url: string,
  ) {
    super(
      `${url} answered ${status} with ${describeBody(contentType)}, not the gateway's JSON: is the URL a Gantry gateway?`,
    );
  }
}

/**
 * `webhooks.verify` refused a delivery: forged or altered (no signature matches), stale (its
 * timestamp is more than five minutes off), or missing a Standard Webhooks header. The
 * receiver should answer it 4xx and not act on it.
 */
export class WebhookVerificationError extends GantryError {
  override name = "WebhookVerificationError";
}

function describeBody(contentType: string): string {
  const type = contentType.split(";")[0]?.trim();
  if (!type) return "a body of no stated type";
  return type === "text/html" ? "an HTML page" : type;
}

/** Turns an error response into an `APIError`, whatever its body holds. */
export async function apiErrorFrom(response: Response): Promise<APIError> {
  const text = await response.text().catch(() => "");
  const type = response.headers.get("content-type") ?? "";
  // A proxy or load balancer in front of the gateway may answer with plain text (its first
  // line is the message) or HTML (a page, said as such rather than printed whole).
  const said = /html/i.test(type) ? "" : (text.trim().split("\n")[0]?.slice(0, 200) ?? "");
  const fallback: Problem = {
    type: "about:blank",
    title:
      said ||
      `${response.statusText || "error"} (${describeBody(type)}: is the URL a Gantry gateway?)`,
    status: response.status,
    code: `http_${response.status}`,
  };
  let problem = fallback;
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && "title" in parsed)
      problem = { ...fallback, ...(parsed as Partial<Problem>) };
  } catch {
    // Not JSON: the fallback stands.
  }
  return new APIError(response.status, problem, response.headers);
}
