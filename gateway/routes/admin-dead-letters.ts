import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import {
  type DeadLetter,
  DeadLetterList,
  Instant,
  JobId,
  ModelId,
  RedriveRequest,
  RedriveResult,
} from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { parseJsonBody, parseQuery } from "../http/validation.ts";
import { redriveJobs } from "../jobs/retry.ts";
import { documented, inline, problems } from "../openapi/parts.ts";
import type { DeadLetterFilter } from "../store/dead-letters.ts";
import { type JobRow, toJob } from "../store/job-rows.ts";

const ListQuery = z.object({
  model: ModelId.optional(),
  code: z
    .string()
    .min(1)
    .max(100)
    .optional()
    .openapi({ param: { example: "timeout" } }),
  // A day or an instant, as the usage routes' `from`.
  since: Instant.optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: JobId.optional(),
});

const listRoute = createRoute({
  method: "get",
  path: "/",
  operationId: "listDeadLetters",
  summary: "Jobs that failed for good, every tenant (admin)",
  description:
    "Oldest first. Filters: `model`, `code` (the error's code), `since` (failed at or after).",
  request: { query: ListQuery },
  responses: {
    200: { description: "A page of dead letters", content: inline(DeadLetterList) },
    ...problems(401, 403, 422),
  },
});
const redriveRoute = createRoute({
  method: "post",
  path: "/redrive",
  operationId: "redriveDeadLetters",
  summary: "Queue matching dead letters again, in bounded passes (admin)",
  description:
    "Retries up to `limit` (≤ 500) matching jobs, as `POST /v1/jobs/{id}/retry` would. Call again with `next_cursor` until it is null.",
  request: {
    body: {
      required: true,
      content: {
        "application/json": {
          ...inline(RedriveRequest, "input")["application/json"],
          example: { model: "ocr", code: "timeout", limit: 100 },
        },
      },
    },
  },
  responses: {
    200: { description: "What this pass did", content: inline(RedriveResult) },
    ...problems(401, 403, 422),
  },
});

const deadLetter = (row: JobRow): DeadLetter => ({ ...toJob(row), tenant_id: row.tenant_id });

function filterOf(query: {
  model?: string | undefined;
  code?: string | undefined;
  since?: string | undefined;
  cursor?: string | undefined;
}): Omit<DeadLetterFilter, "limit"> {
  return {
    ...(query.model ? { model: query.model } : {}),
    ...(query.code ? { code: query.code } : {}),
    ...(query.since ? { since: Date.parse(query.since) } : {}),
    ...(query.cursor ? { after: query.cursor } : {}),
  };
}

/**
 * Dead letters: jobs that failed for good (a permanent error, or their last attempt), of
 * every tenant; the operator's view, under `/v1/admin`. Oldest first, so that a redrive
 * pass walks them once and resumes from its cursor.
 */
export const adminDeadLetterRoutes = documented(new OpenAPIHono<AppEnv>(), listRoute, redriveRoute)
  .get(listRoute.getRoutingPath(), async (c) => {
    const query = parseQuery(ListQuery, c.req);
    const rows = await c.get("gateway").stores.jobs.deadLetters({
      ...filterOf(query),
      limit: query.limit + 1,
    });
    const page = rows.slice(0, query.limit);
    const list: DeadLetterList = {
      object: "list",
      data: page.map(deadLetter),
      next_cursor: rows.length > query.limit ? (page.at(-1)?.id ?? null) : null,
    };
    return c.json(list);
  })
  /**
   * Puts up to `limit` matching dead letters back in the queue, one retry each (the same as
   * `POST /v1/jobs/{id}/retry`). Bounded per call; `next_cursor` resumes. A redriven job is
   * no longer failed, so a pass that is repeated without its cursor does not redrive twice.
   */
  .post(redriveRoute.getRoutingPath(), async (c) => {
    const request = await parseJsonBody(c, RedriveRequest);
    const gateway = c.get("gateway");
    const rows = await gateway.stores.jobs.deadLetters({
      ...filterOf(request),
      limit: request.limit + 1,
    });
    const batch = rows.slice(0, request.limit);
    const { redriven, skipped } = await redriveJobs(gateway, batch);
    const result: RedriveResult = {
      object: "redrive",
      redriven,
      skipped,
      next_cursor: rows.length > request.limit ? (batch.at(-1)?.id ?? null) : null,
    };
    return c.json(result);
  });
