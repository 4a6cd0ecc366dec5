import { z } from "zod";
import {
  Batch,
  BatchRequest,
  BatchWebhookPayload,
  DeadLetterList,
  JobList,
  RedriveRequest,
  RedriveResult,
} from "../shared/protocol/index.ts";
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

/** `POST /v1/jobs`'s body, with an example that sets the execution limit. */
export const jobRequestBody = {
  required: true,
  description:
    "`timeout_seconds` bounds each attempt's run: past it the agent stops the run (killing its runner if inference does not return) and the job fails with `timeout` (retried only for models that declare timeouts transient). Omitted: the model's default. More than the plan's `max_timeout_seconds`: `422 timeout_too_long`.",
  content: {
    "application/json": {
      ...json("JobRequest")["application/json"],
      example: {
        model: "ocr",
        input: { image: "upl_01jq8y3k2m4n5p6q7r8s9t0v1w" },
        timeout_seconds: 30,
        metadata: { invoice: "inv-42" },
      },
    },
  },
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

const batchIdParam = {
  name: "id",
  in: "path",
  required: true,
  schema: { type: "string", pattern: "^bat_" },
};
const modelIdParam = { name: "id", in: "path", required: true, schema: { type: "string" } };

/** `batch.completed`, beside the job webhooks in the document's `webhooks`. */
export const batchWebhook = {
  batchCompleted: {
    post: {
      summary: "Every job of a batch is terminal. Signed per the Standard Webhooks spec.",
      requestBody: { content: inline(BatchWebhookPayload) },
      responses: { "200": { description: "Any 2xx acknowledges the delivery." } },
    },
  },
};

/** Routes of issue 13's job API that stand apart from the core job routes. */
export function jobApiPaths() {
  return {
    "/v1/jobs/{id}/retry": {
      post: {
        summary: "Run a failed, expired or canceled job again",
        description:
          "Back to `queued` under the same id: attempts start again, `output` and `error` are cleared, the deadline moves by the job's original TTL, and its events keep the earlier life. `409 job_not_retryable` for a job in any other state or of a model no longer served. The queued-job bounds apply as to a submit: `429 too_many_queued_jobs` (the plan's) or `503 queue_full` (the model's), with `Retry-After`.",
        parameters: [jobIdParam],
        responses: {
          "202": { description: "Queued again", content: json("Job") },
          ...problems(401, 403, 404, 409, 429, 503),
        },
      },
    },
    "/v1/jobs/{id}/inputs/{name}": {
      get: {
        summary: "Download a stored input of a job (its image)",
        description:
          "Redirects (302) to a short-lived URL of the upload the job's input names under `name` (`image`), as artifacts are served. `404` for a job or input that does not exist, and for an input given as an https URL (Gantry stores no copy; the URL is in `input`). `410 input_expired` once retention deleted it (the job then shows `input_expired: true`).",
        parameters: [
          jobIdParam,
          {
            name: "name",
            in: "path",
            required: true,
            schema: { type: "string", pattern: "^[A-Za-z0-9_-]{1,64}$" },
            examples: { image: { value: "image" } },
          },
        ],
        responses: {
          "302": {
            description: "The input's presigned URL, in Location",
            headers: { Location: { schema: { type: "string", format: "uri" } } },
          },
          ...problems(401, 403, 404, 410),
        },
      },
    },
    "/v1/batches": {
      post: {
        summary: "Submit up to 1 000 jobs of one model as a batch",
        parameters: [
          {
            name: "Idempotency-Key",
            in: "header",
            required: false,
            description:
              "The same key and body again (a retry after a lost answer, or two at once) answer the batch already made, with `Idempotent-Replayed: true` and an empty `errors`; another body under the key is `422 idempotency_key_reused`.",
            schema: { type: "string", maxLength: 255 },
          },
        ],
        description:
          "Each item `{input, metadata?, timeout_seconds?}` is checked on its own: a bad one is listed in `errors` by its index and the others are queued (with `atomic: true`, one bad item refuses the batch: `422 batch_invalid` and no job is made; when every item is bad, likewise). A batch-wide `timeout_seconds` applies to the items that name none. `webhook` gets one signed `batch.completed` once every job is terminal.",
        requestBody: {
          required: true,
          content: {
            "application/json": {
              ...inline(BatchRequest, "input")["application/json"],
              example: {
                model: "ocr",
                items: [
                  { input: { image: "upl_…" }, metadata: { page: "1" } },
                  { input: { image: "upl_…" }, metadata: { page: "2" }, timeout_seconds: 120 },
                ],
                timeout_seconds: 60,
                webhook: { url: "https://example.com/hooks/gantry" },
              },
            },
          },
        },
        responses: {
          "202": { description: "The batch, with `errors`", content: inline(Batch) },
          ...problems(400, 401, 403, 413, 415, 422, 429, 503),
        },
      },
    },
    "/v1/batches/{id}": {
      get: {
        summary: "A batch and its request_counts (read from its jobs)",
        parameters: [batchIdParam],
        responses: {
          "200": { description: "The batch", content: inline(Batch) },
          ...problems(401, 404),
        },
      },
    },
    "/v1/batches/{id}/jobs": {
      get: {
        summary: "A batch's jobs, in submission order",
        parameters: [
          batchIdParam,
          { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: 100 } },
          { name: "cursor", in: "query", schema: { type: "string" } },
        ],
        responses: {
          "200": { description: "A page of jobs", content: inline(JobList) },
          ...problems(401, 404, 422),
        },
      },
    },
    "/v1/batches/{id}/cancel": {
      post: {
        summary: "Cancel every queued or running job of a batch",
        parameters: [batchIdParam],
        responses: {
          "200": { description: "The batch", content: inline(Batch) },
          ...problems(401, 404),
        },
      },
    },
    "/v1/admin/models/{id}/pause": {
      post: {
        summary: "Pause a model (admin)",
        description:
          "Agents' claims of its jobs are refused (`409 model_paused`) and the jobs wait; with `reject_new: true`, `POST /v1/jobs` answers `503 model_paused` with `Retry-After`. Other gateways see the switch within a second.",
        parameters: [modelIdParam],
        requestBody: {
          required: false,
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: { reject_new: { type: "boolean" }, reason: { type: "string" } },
              },
              example: { reject_new: true, reason: "GPU pool overloaded" },
            },
          },
        },
        responses: {
          "200": { description: "The model's live state" },
          ...problems(401, 403, 404, 422),
        },
      },
    },
    "/v1/admin/models/{id}/resume": {
      post: {
        summary: "Resume a paused model (admin): its waiting jobs are published again",
        parameters: [modelIdParam],
        responses: {
          "200": { description: "The model's live state, with `republished`" },
          ...problems(401, 403, 404),
        },
      },
    },
    "/v1/admin/models/{id}/purge": {
      post: {
        summary: "Cancel a model's queued jobs, `limit` (≤ 1 000) per call (admin)",
        description:
          "`{limit?, cursor?}` → `{canceled, next_cursor}`; call again with the cursor until it is null.",
        parameters: [modelIdParam],
        responses: {
          "200": { description: "What this pass canceled" },
          ...problems(401, 403, 404, 422),
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
