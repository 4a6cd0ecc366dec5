import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { ZodError } from "zod";
import { HttpProblem } from "../shared/errors.ts";

export const PROBLEM_BASE = "https://gantry.dev/problems/";

export function problemResponse(
  c: Context,
  problem: HttpProblem,
  headers?: Record<string, string>,
) {
  const body = {
    type: PROBLEM_BASE + problem.code,
    title: problem.title,
    status: problem.status,
    code: problem.code,
    ...(problem.detail ? { detail: problem.detail } : {}),
    instance: c.req.path,
    ...problem.extra,
  };
  return c.body(JSON.stringify(body), problem.status as ContentfulStatusCode, {
    "content-type": "application/problem+json",
    ...headers,
  });
}

/** Zod's issues as `{path, message}` pairs a client can show next to its fields. */
export function validationProblem(error: ZodError, where: string): HttpProblem {
  const errors = error.issues.slice(0, 20).map((issue) => ({
    path: issue.path.length ? issue.path.join(".") : "(root)",
    message: issue.message,
  }));
  const first = errors[0];
  const detail = first ? `${where}: ${first.path}: ${first.message}` : `${where} is invalid`;
  return new HttpProblem(422, "validation_failed", "Request validation failed", detail, { errors });
}
