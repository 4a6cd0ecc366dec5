import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";
import { HttpProblem, UserError } from "../../shared/errors.ts";
import type { Problem } from "../../shared/protocol/index.ts";

export const PROBLEM_BASE = "https://gantry.dev/problems/";

/** How an error is answered: its problem+json body, the status and headers it goes with. */
export interface ProblemAnswer {
  status: number;
  body: Problem & { code: string };
  headers: Record<string, string>;
  /** A bug rather than a refusal: log it with its stack; the body says nothing of it. */
  internal: boolean;
}

/**
 * Any error as the problem+json the API answers with: an `HttpProblem` as it says; a
 * `UserError` (a `ConfigurationError`: a missing or bad setting) as a 500 `misconfigured`
 * naming the setting; anything else as a 500 `internal_error` that gives nothing away.
 * Pure, so `onError`, the Workers entry and the batched agent routes answer alike.
 */
export function problemFor(error: unknown, instance: string): ProblemAnswer {
  let problem: HttpProblem;
  let internal = false;
  if (error instanceof HttpProblem) problem = error;
  else if (error instanceof UserError) {
    const setting = "setting" in error ? { setting: String(error.setting) } : {};
    problem = new HttpProblem(
      500,
      "misconfigured",
      "Gateway misconfigured",
      error.message,
      setting,
    );
  } else {
    internal = true;
    problem = new HttpProblem(
      500,
      "internal_error",
      "Internal error",
      "Something went wrong on our side.",
    );
  }
  const body = {
    type: PROBLEM_BASE + problem.code,
    title: problem.title,
    status: problem.status,
    code: problem.code,
    ...(problem.detail ? { detail: problem.detail } : {}),
    instance,
    ...problem.extra,
  };
  return { status: problem.status, body, headers: problem.responseHeaders(), internal };
}

/**
 * Logs what an answer hides: a bug with its stack, a misconfiguration with its message. A
 * refusal is the caller's business and is not logged here.
 */
export function logFailure(
  log: { error(fields: object, message: string): void },
  error: unknown,
  answer: ProblemAnswer,
  path: string,
): void {
  if (answer.internal) {
    log.error(
      { err: error instanceof Error ? error.stack : String(error), path },
      "internal error",
    );
  } else if (error instanceof UserError) {
    log.error({ err: error.message, path }, "gateway misconfigured");
  }
}

/**
 * The answer to `error` (see `problemFor`) through Hono's context, so headers middleware has
 * set (`RateLimit-*`) go with it.
 */
export function problemResponse(c: Context, error: unknown, headers?: Record<string, string>) {
  return answerWith(c, problemFor(error, c.req.path), headers);
}

/** A `ProblemAnswer` through Hono's context. */
export function answerWith(c: Context, answer: ProblemAnswer, headers?: Record<string, string>) {
  return c.body(JSON.stringify(answer.body), answer.status as ContentfulStatusCode, {
    ...problemHeaders(answer),
    ...headers,
  });
}

/** A `ProblemAnswer` as a plain Web Response, for code outside the Hono app. */
export function answerResponse(answer: ProblemAnswer): Response {
  return new Response(JSON.stringify(answer.body), {
    status: answer.status,
    headers: problemHeaders(answer),
  });
}

const problemHeaders = (answer: ProblemAnswer) => ({
  "content-type": "application/problem+json",
  ...answer.headers,
});

/** Zod's issues as `{path, message}` pairs a client can show next to its fields. */
export function validationProblem(error: ZodError, where: string): HttpProblem {
  // zod runs a field's checks even once its type failed ("items": "" also "must be at least 1
  // character long", scopes sent as a string "at most 3 characters"): the type says it all.
  const mistyped = new Set(
    error.issues.filter((issue) => issue.code === "invalid_type").map((i) => i.path.join(".")),
  );
  const issues = error.issues.filter(
    (issue) => issue.code === "invalid_type" || !mistyped.has(issue.path.join(".")),
  );
  const errors = issues.slice(0, 20).map((issue) => ({
    path: issue.path.length ? issue.path.join(".") : "(root)",
    message: issue.message,
  }));
  const first = issues[0];
  // A whole value refused (a header, a body that is not an object) is named by `where` alone.
  const said = first?.path.length ? `${errors[0]?.path}: ${first.message}` : first?.message;
  const detail = said ? `${where}: ${said}` : `${where} is invalid`;
  return new HttpProblem(422, "validation_failed", "Request validation failed", detail, { errors });
}
