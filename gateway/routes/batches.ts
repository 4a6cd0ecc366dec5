import { Hono } from "hono";
import { z } from "zod";
import { notFound } from "../../shared/errors.ts";
import { BatchRequest, JobId, type JobList } from "../../shared/protocol/index.ts";
import { newTraceparent } from "../../shared/trace.ts";
import type { AppEnv } from "../env.ts";
import { batchView } from "../jobs/batch-view.ts";
import { createBatch } from "../jobs/batches.ts";
import { afterTransition } from "../jobs/lifecycle.ts";
import { toJob } from "../store/job-rows.ts";
import { idempotencyKeyOf, parseJsonBody, parseWith } from "../validation.ts";

const JobsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(100),
  cursor: JobId.optional(),
});

/** Cancels this many of a batch's jobs per statement pass (a batch holds at most 1 000). */
const CANCEL_PAGE = 200;

async function batchOr404(c: { var: AppEnv["Variables"] }, id: string) {
  const row = await c.var.gateway.stores.jobs.batchForTenant(c.var.tenant.id, id);
  if (!row) throw notFound("Batch", id);
  return row;
}

/** `/v1/batches`: many jobs of one model in one request, followed as one. */
export const batchRoutes = new Hono<AppEnv>()
  .post("/", async (c) => {
    const request = await parseJsonBody(c, BatchRequest);
    const { batch, replayed } = await createBatch(c.var.gateway, c.var.tenant, request, {
      traceparent: newTraceparent(),
      idempotencyKey: idempotencyKeyOf(c),
    });
    c.header("location", `/v1/batches/${batch.id}`);
    if (replayed) c.header("idempotent-replayed", "true");
    return c.json(batch, 202);
  })
  .get("/:id", async (c) => {
    const row = await batchOr404(c, c.req.param("id"));
    return c.json(await batchView(c.var.gateway, row));
  })
  .get("/:id/jobs", async (c) => {
    const row = await batchOr404(c, c.req.param("id"));
    const query = parseWith(JobsQuery, c.req.query(), "query");
    const rows = await c.var.gateway.stores.jobs.batchJobs(row.id, {
      limit: query.limit + 1,
      ...(query.cursor ? { after: query.cursor } : {}),
    });
    const page = rows.slice(0, query.limit);
    const list: JobList = {
      object: "list",
      data: page.map(toJob),
      next_cursor: rows.length > query.limit ? (page.at(-1)?.id ?? null) : null,
    };
    return c.json(list);
  })
  /** Cancels every job of the batch still queued or running; the batch ends `canceled`. */
  .post("/:id/cancel", async (c) => {
    const gateway = c.var.gateway;
    const row = await batchOr404(c, c.req.param("id"));
    const now = gateway.now();
    await gateway.stores.jobs.markBatchCanceled(row.id, now);
    let after: string | undefined;
    for (;;) {
      const page = await gateway.stores.jobs.batchJobs(row.id, {
        limit: CANCEL_PAGE,
        active: true,
        ...(after ? { after } : {}),
      });
      for (const job of page) {
        const result = await gateway.stores.jobs.cancel(row.tenant_id, job.id, now);
        if (result.ok) afterTransition(gateway, result.job);
      }
      if (page.length < CANCEL_PAGE) break;
      after = page.at(-1)?.id;
    }
    const fresh = (await gateway.stores.jobs.batchForTenant(row.tenant_id, row.id)) ?? row;
    return c.json(await batchView(gateway, fresh));
  });
