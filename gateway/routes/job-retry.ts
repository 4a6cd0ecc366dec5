import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../env.ts";
import { retryJob } from "../jobs/retry.ts";
import { documented, JobIdParams, json, problems } from "../openapi/parts.ts";
import { toJob } from "../store/job-rows.ts";

/** `POST /v1/jobs/{id}/retry`: the job back in the queue, answered `202` like a submit. */
const retryRoute = createRoute({
  method: "post",
  path: "/{id}/retry",
  operationId: "retryJob",
  summary: "Run a failed, expired or canceled job again",
  description:
    "Back to `queued` under the same id: attempts start again, `output` and `error` are cleared, the deadline moves by the job's original TTL, and its events keep the earlier life. `409 job_not_retryable` for a job in any other state or of a model no longer served; `409 input_expired` for one whose input upload retention deleted (submit a new job with a new upload). The queued-job bounds apply as to a submit: `429 too_many_queued_jobs` (the plan's) or `503 queue_full` (the model's), with `Retry-After`.",
  request: { params: JobIdParams },
  responses: {
    202: { description: "Queued again", content: json("Job") },
    ...problems(401, 403, 404, 409, 429, 503),
  },
});

export const jobRetryRoutes = documented(new OpenAPIHono<AppEnv>(), retryRoute).post(
  retryRoute.getRoutingPath(),
  async (c) => {
    const tenant = c.get("tenant");
    const job = await retryJob(c.get("gateway"), tenant.id, c.req.param("id"), tenant);
    c.header("location", `/v1/jobs/${job.id}`);
    return c.json(toJob(job), 202);
  },
);
