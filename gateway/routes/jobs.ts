import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import {
  isTerminal,
  JobId,
  type JobList,
  JobMetadata,
  JobRequest,
  JobStatus,
} from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { idempotencyKeyOf, parseJsonBody, parseQuery, parseWith } from "../http/validation.ts";
import { jobView, listedJobs } from "../jobs/job-view.ts";
import { afterTransition } from "../jobs/lifecycle.ts";
import { submitJob } from "../jobs/submit.ts";
import { tenantJob } from "../jobs/tenant-job.ts";
import { preferredWait, waitForJob } from "../jobs/wait.ts";
import { documented, JobIdParams, json, problems } from "../openapi/parts.ts";
import { MAX_METADATA_FILTERS } from "../store/job-metadata.ts";
import { toJob } from "../store/job-rows.ts";

const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: JobId.optional(),
  status: JobStatus.optional(),
  model: z.string().min(1).max(64).optional().describe("Only this model's jobs."),
});

/** The `Prefer` header of `POST /v1/jobs` (RFC 7240). */
const preferWaitParam = {
  name: "Prefer",
  in: "header" as const,
  required: false,
  description:
    "`wait` (60 s) or `wait=N` (seconds, at most 60): hold the answer until the job is terminal or the time is up. `200` with the finished job, or the usual `202` with its state then (`Preference-Applied: wait=N`). A malformed preference is ignored.",
  schema: { type: "string" as const },
  examples: { wait: { value: "wait=10" } },
};

/** `metadata.KEY=VALUE` on `GET /v1/jobs` (OpenAPI's deepObject style). */
const metadataFilterParam = {
  name: "metadata",
  in: "query" as const,
  required: false,
  style: "deepObject" as const,
  explode: true,
  description:
    "Only jobs whose metadata holds each `metadata.KEY=VALUE` given (at most 4; `422 too_many_filters` past that).",
  schema: { type: "object" as const, additionalProperties: { type: "string" as const } },
  examples: { customer: { value: { customer: "acme" } } },
};

/** The prefix of the `metadata.KEY=VALUE` query parameters. */
export const METADATA_FILTER = "metadata.";

/** `metadata.KEY=VALUE` query parameters, checked as metadata is on submit. */
export function metadataFilters(query: Record<string, string>): [string, string][] {
  const pairs = Object.entries(query)
    .filter(([name]) => name.startsWith(METADATA_FILTER))
    .map(([name, value]) => [name.slice(METADATA_FILTER.length), value] as [string, string]);
  if (pairs.length > MAX_METADATA_FILTERS) {
    throw new HttpProblem(
      422,
      "too_many_filters",
      "Too many metadata filters",
      `At most ${MAX_METADATA_FILTERS} metadata.KEY=VALUE filters per listing.`,
    );
  }
  parseWith(JobMetadata, Object.fromEntries(pairs), "metadata filter");
  return pairs;
}

const submitRoute = createRoute({
  method: "post",
  path: "/",
  operationId: "submitJob",
  summary: "Submit a job",
  parameters: [preferWaitParam],
  request: {
    headers: z.object({
      "Idempotency-Key": z.string().max(255).optional(),
      traceparent: z.string().optional(),
    }),
    body: {
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
    },
  },
  responses: {
    200: {
      description: "Under `Prefer: wait`: the job finished within the wait",
      headers: { "Preference-Applied": { schema: { type: "string" } } },
      content: json("Job"),
    },
    202: { description: "Accepted and queued", content: json("Job") },
    ...problems(400, 401, 403, 409, 413, 415, 422, 429, 503),
  },
});
const listRoute = createRoute({
  method: "get",
  path: "/",
  operationId: "listJobs",
  summary: "List jobs, newest first",
  parameters: [metadataFilterParam],
  request: { query: ListQuery },
  responses: {
    200: { description: "A page of jobs", content: json("JobList") },
    ...problems(401, 422),
  },
});
const getRoute = createRoute({
  method: "get",
  path: "/{id}",
  operationId: "getJob",
  summary: "Get a job",
  request: { params: JobIdParams },
  responses: {
    200: { description: "The job", content: json("Job") },
    ...problems(401, 404),
  },
});
const cancelRoute = createRoute({
  method: "post",
  path: "/{id}/cancel",
  operationId: "cancelJob",
  summary: "Cancel a queued or running job",
  request: { params: JobIdParams },
  responses: {
    200: { description: "Canceled", content: json("Job") },
    ...problems(401, 404, 409),
  },
});

export const jobRoutes = documented(
  new OpenAPIHono<AppEnv>(),
  submitRoute,
  listRoute,
  getRoute,
  cancelRoute,
)
  .post(submitRoute.getRoutingPath(), async (c) => {
    const request = await parseJsonBody(c, JobRequest);
    const idempotencyKey = idempotencyKeyOf(c);
    const { job, created } = await submitJob(c.get("gateway"), c.get("tenant"), request, {
      idempotencyKey,
      keyId: c.get("apiKey").id,
      // Every job gets a trace: the client's, or a new one its submit starts.
      traceparent: c.req.header("traceparent") ?? null,
    });
    c.header("location", `/v1/jobs/${job.id}`);
    if (!created) c.header("idempotent-replayed", "true");
    const wait = preferredWait(c.req.header("prefer"));
    if (wait === null) return c.json(toJob(job), 202);
    c.header("preference-applied", `wait=${wait}`);
    const now = await waitForJob(c.get("gateway"), job, wait * 1000, c.req.raw.signal);
    const view = await jobView(c.get("gateway"), now);
    return c.json(view, isTerminal(now.status as JobStatus) ? 200 : 202);
  })
  .get(listRoute.getRoutingPath(), async (c) => {
    const query = parseQuery(ListQuery, c.req, [METADATA_FILTER]);
    const metadata = metadataFilters(c.req.query());
    const rows = await c.get("gateway").stores.jobs.list(c.get("tenant").id, {
      limit: query.limit + 1,
      ...(metadata.length ? { metadata } : {}),
      ...(query.cursor ? { before: query.cursor } : {}),
      ...(query.status ? { status: query.status } : {}),
      ...(query.model ? { model: query.model } : {}),
    });
    const page = rows.slice(0, query.limit);
    const list: JobList = {
      object: "list",
      data: await listedJobs(c.get("gateway"), page),
      next_cursor: rows.length > query.limit ? (page.at(-1)?.id ?? null) : null,
    };
    return c.json(list);
  })
  .get(getRoute.getRoutingPath(), async (c) => {
    const row = await tenantJob(c.get("gateway"), c.get("tenant").id, c.req.param("id"));
    return c.json(await jobView(c.get("gateway"), row));
  })
  .post(cancelRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const id = c.req.param("id");
    const result = await gateway.stores.jobs.cancel(c.get("tenant").id, id, gateway.now());
    if (result.ok) {
      afterTransition(gateway, result.job);
      return c.json(toJob(result.job));
    }
    if (!result.current || result.current.tenant_id !== c.get("tenant").id)
      throw notFound("Job", id);
    throw new HttpProblem(
      409,
      "job_not_cancelable",
      "Job cannot be canceled",
      `The job has already ended (${result.current.status}); only a queued or running job can be canceled.`,
    );
  });
