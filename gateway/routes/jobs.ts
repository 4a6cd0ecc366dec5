import { Hono } from "hono";
import { z } from "zod";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import { JobId, type JobList, JobRequest, JobStatus } from "../../shared/protocol/index.ts";
import { newTraceparent } from "../../shared/trace.ts";
import type { AppEnv } from "../env.ts";
import { afterTransition } from "../jobs/lifecycle.ts";
import { submitJob } from "../jobs/submit.ts";
import { toJob } from "../store/job-rows.ts";
import { parseJsonBody, parseWith } from "../validation.ts";

const IdempotencyKey = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[\x21-\x7e]+$/, "printable ASCII");
const TraceParent = z.string().regex(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/);

const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: JobId.optional(),
  status: JobStatus.optional(),
});

export const jobRoutes = new Hono<AppEnv>()
  .post("/", async (c) => {
    const request = await parseJsonBody(c, JobRequest);
    const rawKey = c.req.header("idempotency-key");
    const idempotencyKey =
      rawKey === undefined ? null : parseWith(IdempotencyKey, rawKey, "Idempotency-Key header");
    const trace = TraceParent.safeParse(c.req.header("traceparent"));
    const { job, created } = await submitJob(c.var.gateway, c.var.tenant, request, {
      idempotencyKey,
      // Every job gets a trace: the client's, or a new one started here.
      traceparent: trace.success ? trace.data : newTraceparent(),
    });
    c.header("location", `/v1/jobs/${job.id}`);
    if (!created) c.header("idempotent-replayed", "true");
    return c.json(toJob(job), 202);
  })
  .get("/", async (c) => {
    const query = parseWith(ListQuery, c.req.query(), "query");
    const rows = await c.var.gateway.stores.jobs.list(c.var.tenant.id, {
      limit: query.limit + 1,
      ...(query.cursor ? { before: query.cursor } : {}),
      ...(query.status ? { status: query.status } : {}),
    });
    const page = rows.slice(0, query.limit);
    const list: JobList = {
      object: "list",
      data: page.map(toJob),
      next_cursor: rows.length > query.limit ? (page.at(-1)?.id ?? null) : null,
    };
    return c.json(list);
  })
  .get("/:id", async (c) => {
    const row = await c.var.gateway.stores.jobs.forTenant(c.var.tenant.id, c.req.param("id"));
    if (!row) throw notFound("Job", c.req.param("id"));
    return c.json(toJob(row));
  })
  .post("/:id/cancel", async (c) => {
    const gateway = c.var.gateway;
    const id = c.req.param("id");
    const result = await gateway.stores.jobs.cancel(c.var.tenant.id, id, gateway.now());
    if (result.ok) {
      afterTransition(gateway, result.job);
      return c.json(toJob(result.job));
    }
    if (!result.current || result.current.tenant_id !== c.var.tenant.id) throw notFound("Job", id);
    throw new HttpProblem(
      409,
      "job_not_cancelable",
      "Job cannot be canceled",
      `The job is already ${result.current.status}.`,
    );
  });
