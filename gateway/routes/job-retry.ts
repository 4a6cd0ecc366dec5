import { Hono } from "hono";
import type { AppEnv } from "../env.ts";
import { retryJob } from "../jobs/retry.ts";
import { toJob } from "../store/job-rows.ts";

/** `POST /v1/jobs/{id}/retry`: the job back in the queue, answered `202` like a submit. */
export const jobRetryRoutes = new Hono<AppEnv>().post("/:id/retry", async (c) => {
  const tenant = c.var.tenant;
  const job = await retryJob(c.var.gateway, tenant.id, c.req.param("id"), tenant);
  c.header("location", `/v1/jobs/${job.id}`);
  return c.json(toJob(job), 202);
});
