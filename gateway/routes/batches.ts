import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { notFound } from "../../shared/errors.ts";
import { Batch, BatchRequest, JobId, JobList } from "../../shared/protocol/index.ts";
import { parseTraceparent, requestTraceparent } from "../../shared/trace.ts";
import type { AppEnv } from "../env.ts";
import { idempotencyKeyOf, parseJsonBody, parseQuery } from "../http/validation.ts";
import { cancelBatch } from "../jobs/batch-cancel.ts";
import { batchView } from "../jobs/batch-view.ts";
import { createBatch } from "../jobs/batches.ts";
import { BatchIdParams, documented, inline, problems } from "../openapi/parts.ts";
import { toJob } from "../store/job-rows.ts";

const JobsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(100),
  cursor: JobId.optional(),
});

async function batchOr404(c: Pick<Context<AppEnv>, "get">, id: string) {
  const row = await c.get("gateway").stores.jobs.batchForTenant(c.get("tenant").id, id);
  if (!row) throw notFound("Batch", id);
  return row;
}

const submitRoute = createRoute({
  method: "post",
  path: "/",
  operationId: "createBatch",
  summary: "Submit up to 1 000 jobs of one model as a batch",
  description:
    "Each item `{input, metadata?, timeout_seconds?}` is checked on its own: a bad one is listed in `errors` by its index and the others are queued (with `atomic: true`, one bad item refuses the batch: `422 batch_invalid` and no job is made; when every item is bad, likewise). A batch-wide `timeout_seconds` applies to the items that name none. The queued-job bounds apply to the batch as a whole: the first items that fit in the plan's `max_queued_jobs` and the model's queue bound are queued, the rest are listed in `errors` (`too_many_queued_jobs`, `queue_full`); with `atomic: true`, or when no item fits, the batch is refused as a submit is (`429 too_many_queued_jobs` or `503 queue_full`, with `Retry-After`) and no job is made; so is a batch to a model paused with `reject_new` (`503 model_paused`). `webhook` gets one signed `batch.completed` once every job is terminal.",
  request: {
    headers: z.object({
      "Idempotency-Key": z
        .string()
        .max(255)
        .optional()
        .openapi({
          param: {
            description:
              "The same key and body again (a retry after a lost answer, or two at once) answer the batch already made, with `Idempotent-Replayed: true` and an empty `errors`; another body under the key is `422 idempotency_key_reused`.",
          },
        }),
    }),
    body: {
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
  },
  responses: {
    202: { description: "The batch, with `errors`", content: inline(Batch) },
    ...problems(400, 401, 403, 413, 415, 422, 429, 503),
  },
});
const getRoute = createRoute({
  method: "get",
  path: "/{id}",
  operationId: "getBatch",
  summary: "A batch and its request_counts (read from its jobs)",
  request: { params: BatchIdParams },
  responses: {
    200: { description: "The batch", content: inline(Batch) },
    ...problems(401, 404),
  },
});
const jobsRoute = createRoute({
  method: "get",
  path: "/{id}/jobs",
  operationId: "listBatchJobs",
  summary: "A batch's jobs, in the order of its items",
  request: { params: BatchIdParams, query: JobsQuery },
  responses: {
    200: { description: "A page of jobs", content: inline(JobList) },
    ...problems(401, 404, 422),
  },
});
const cancelRoute = createRoute({
  method: "post",
  path: "/{id}/cancel",
  operationId: "cancelBatch",
  summary: "Cancel every queued or running job of a batch",
  request: { params: BatchIdParams },
  responses: {
    200: { description: "The batch", content: inline(Batch) },
    ...problems(401, 404),
  },
});

/** `/v1/batches`: many jobs of one model in one request, followed as one. */
export const batchRoutes = documented(
  new OpenAPIHono<AppEnv>(),
  submitRoute,
  getRoute,
  jobsRoute,
  cancelRoute,
)
  .post(submitRoute.getRoutingPath(), async (c) => {
    const request = await parseJsonBody(c, BatchRequest);
    // One trace for the batch: the client's, or one started here. Traced, a `batch` span
    // holds the items' submits, so none of them hangs off a span that was never exported.
    const parent = requestTraceparent(c.req.header("traceparent"));
    const span = c.get("gateway").tracer?.startSpan("batch", {
      parent: parseTraceparent(c.req.header("traceparent")) ? parent : null,
      kind: "server",
      attributes: { "gantry.model": request.model, "gantry.tenant_id": c.get("tenant").id },
    });
    const created = await createBatch(c.get("gateway"), c.get("tenant"), request, {
      traceparent: span?.traceparent ?? parent,
      idempotencyKey: idempotencyKeyOf(c),
      keyId: c.get("apiKey").id,
    }).finally(() => span?.end());
    const { batch, replayed } = created;
    c.header("location", `/v1/batches/${batch.id}`);
    if (replayed) c.header("idempotent-replayed", "true");
    return c.json(batch, 202);
  })
  .get(getRoute.getRoutingPath(), async (c) => {
    const row = await batchOr404(c, c.req.param("id"));
    return c.json(await batchView(c.get("gateway"), row));
  })
  .get(jobsRoute.getRoutingPath(), async (c) => {
    const row = await batchOr404(c, c.req.param("id"));
    const query = parseQuery(JobsQuery, c.req);
    const rows = await c.get("gateway").stores.jobs.batchJobs(row.id, {
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
  .post(cancelRoute.getRoutingPath(), async (c) => {
    const row = await batchOr404(c, c.req.param("id"));
    return c.json(await cancelBatch(c.get("gateway"), row));
  });
