import { z } from "zod";
import { DeadLetterList, RedriveRequest, RedriveResult } from "../shared/protocol/index.ts";
import { jobIdParam, json, problems } from "./openapi-parts.ts";

/** A schema written out in place (the shared components list stays the core's). */
function inline(schema: z.ZodType, io: "input" | "output" = "output") {
  const { $schema: _ignored, ...body } = z.toJSONSchema(schema, { io, unrepresentable: "any" });
  return { "application/json": { schema: body } };
}

/** The `Prefer` header of `POST /v1/jobs` (RFC 7240). */
export const preferWaitParam = {
  name: "Prefer",
  in: "header",
  required: false,
  description:
    "`wait` (60 s) or `wait=N` (seconds, at most 60): hold the answer until the job is terminal or the time is up. `200` with the finished job, or the usual `202` with its state then (`Preference-Applied: wait=N`). A malformed preference is ignored.",
  schema: { type: "string" },
  examples: { wait: { value: "wait=10" } },
};

/** `metadata.KEY=VALUE` on `GET /v1/jobs` (OpenAPI's deepObject style). */
export const metadataFilterParam = {
  name: "metadata",
  in: "query",
  required: false,
  style: "deepObject",
  explode: true,
  description:
    "Only jobs whose metadata holds each `metadata.KEY=VALUE` given (at most 4; `422 too_many_filters` past that).",
  schema: { type: "object", additionalProperties: { type: "string" } },
  examples: { customer: { value: { customer: "acme" } } },
};

/** What `POST /v1/jobs` answers under `Prefer: wait` when the job finished in time. */
export const waitedResponse = {
  "200": {
    description: "Under `Prefer: wait`: the job finished within the wait",
    headers: { "Preference-Applied": { schema: { type: "string" } } },
    content: json("Job"),
  },
};

/** Routes of issue 13's job API that stand apart from the core job routes. */
export function jobApiPaths() {
  return {
    "/v1/jobs/{id}/retry": {
      post: {
        summary: "Run a failed, expired or canceled job again",
        description:
          "Back to `queued` under the same id: attempts start again, `output` and `error` are cleared, the deadline moves by the job's original TTL, and its events keep the earlier life. `409 job_not_retryable` for a job in any other state or of a model no longer served.",
        parameters: [jobIdParam],
        responses: {
          "202": { description: "Queued again", content: json("Job") },
          ...problems(401, 403, 404, 409),
        },
      },
    },
    "/v1/admin/dead-letters": {
      get: {
        summary: "Jobs that failed for good, every tenant (admin)",
        description:
          "Oldest first. Filters: `model`, `code` (the error's code), `since` (failed at or after).",
        parameters: [
          { name: "model", in: "query", schema: { type: "string" } },
          { name: "code", in: "query", schema: { type: "string" }, example: "timeout" },
          { name: "since", in: "query", schema: { type: "string", format: "date-time" } },
          { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 100 } },
          { name: "cursor", in: "query", schema: { type: "string" } },
        ],
        responses: {
          "200": { description: "A page of dead letters", content: inline(DeadLetterList) },
          ...problems(401, 403, 422),
        },
      },
    },
    "/v1/admin/dead-letters/redrive": {
      post: {
        summary: "Queue matching dead letters again, in bounded passes (admin)",
        description:
          "Retries up to `limit` (≤ 500) matching jobs, as `POST /v1/jobs/{id}/retry` would. Call again with `next_cursor` until it is null.",
        requestBody: {
          required: true,
          content: {
            "application/json": {
              ...inline(RedriveRequest, "input")["application/json"],
              example: { model: "ocr", code: "timeout", limit: 100 },
            },
          },
        },
        responses: {
          "200": { description: "What this pass did", content: inline(RedriveResult) },
          ...problems(401, 403, 422),
        },
      },
    },
  };
}
