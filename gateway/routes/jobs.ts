import { Hono } from "hono";
import { z } from "zod";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import {
  isTerminal,
  JobId,
  type JobList,
  JobMetadata,
  JobRequest,
  JobStatus,
} from "../../shared/protocol/index.ts";
import { newTraceparent } from "../../shared/trace.ts";
import type { AppEnv } from "../env.ts";
import { jobView } from "../jobs/job-view.ts";
import { afterTransition } from "../jobs/lifecycle.ts";
import { submitJob } from "../jobs/submit.ts";
import { preferredWait, waitForJob } from "../jobs/wait.ts";
import { MAX_METADATA_FILTERS } from "../store/job-metadata.ts";
import { toJob } from "../store/job-rows.ts";
import { idempotencyKeyOf, parseJsonBody, parseWith } from "../validation.ts";

const TraceParent = z.string().regex(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/);

const ListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: JobId.optional(),
  status: JobStatus.optional(),
  model: z.string().min(1).max(64).optional(),
});

/** `metadata.KEY=VALUE` query parameters, checked as metadata is on submit. */
export function metadataFilters(query: Record<string, string>): [string, string][] {
  const pairs = Object.entries(query)
    .filter(([name]) => name.startsWith("metadata."))
    .map(([name, value]) => [name.slice("metadata.".length), value] as [string, string]);
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

export const jobRoutes = new Hono<AppEnv>()
  .post("/", async (c) => {
    const request = await parseJsonBody(c, JobRequest);
    const idempotencyKey = idempotencyKeyOf(c);
    const trace = TraceParent.safeParse(c.req.header("traceparent"));
    const { job, created } = await submitJob(c.var.gateway, c.var.tenant, request, {
      idempotencyKey,
      // Every job gets a trace: the client's, or a new one started here.
      traceparent: trace.success ? trace.data : newTraceparent(),
    });
    c.header("location", `/v1/jobs/${job.id}`);
    if (!created) c.header("idempotent-replayed", "true");
    const wait = preferredWait(c.req.header("prefer"));
    if (wait === null) return c.json(toJob(job), 202);
    c.header("preference-applied", `wait=${wait}`);
    const now = await waitForJob(c.var.gateway, job, wait * 1000, c.req.raw.signal);
    const view = await jobView(c.var.gateway, now);
    return c.json(view, isTerminal(now.status as JobStatus) ? 200 : 202);
  })
  .get("/", async (c) => {
    const query = parseWith(ListQuery, c.req.query(), "query");
    const metadata = metadataFilters(c.req.query());
    const rows = await c.var.gateway.stores.jobs.list(c.var.tenant.id, {
      limit: query.limit + 1,
      ...(metadata.length ? { metadata } : {}),
      ...(query.cursor ? { before: query.cursor } : {}),
      ...(query.status ? { status: query.status } : {}),
      ...(query.model ? { model: query.model } : {}),
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
    return c.json(await jobView(c.var.gateway, row));
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
