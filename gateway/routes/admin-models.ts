import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { notFound } from "../../shared/errors.ts";
import { JobId } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { parseJsonBody } from "../http/validation.ts";
import { afterTransitions } from "../jobs/lifecycle.ts";
import { modelState } from "../jobs/model-state.ts";
import { forgetSwitches } from "../jobs/model-switches.ts";
import { releaseModel } from "../jobs/release.ts";
import { documented, inline, json, problems } from "../openapi/parts.ts";

const PauseRequest = z.strictObject({
  reject_new: z.boolean().default(false),
  reason: z.string().trim().min(1).max(500).optional(),
});

const PurgeRequest = z.strictObject({
  limit: z.number().int().min(1).max(1_000).default(500),
  // A job id, as next_cursor gives: garbage must not quietly restart the pass.
  cursor: JobId.optional(),
});

const ModelParams = z.object({ id: z.string() });

const pauseRoute = createRoute({
  method: "post",
  path: "/{id}/pause",
  operationId: "pauseModel",
  summary: "Pause a model (admin)",
  description:
    "Agents' claims of its jobs are refused (`409 model_paused`) and the jobs wait; with `reject_new: true`, `POST /v1/jobs` answers `503 model_paused` with `Retry-After`. Other gateways see the switch within a second.",
  request: {
    params: ModelParams,
    body: {
      required: false,
      content: {
        "application/json": {
          ...inline(PauseRequest, "input")["application/json"],
          example: { reject_new: true, reason: "GPU pool overloaded" },
        },
      },
    },
  },
  responses: {
    200: { description: "The model's live state", content: json("ModelSwitched") },
    ...problems(401, 403, 404, 422),
  },
});
const resumeRoute = createRoute({
  method: "post",
  path: "/{id}/resume",
  operationId: "resumeModel",
  summary: "Resume a paused model (admin): its waiting jobs are released again, in fair order",
  request: { params: ModelParams },
  responses: {
    200: {
      description: "The model's live state, with `republished`",
      content: json("ModelSwitched"),
    },
    ...problems(401, 403, 404),
  },
});
const purgeRoute = createRoute({
  method: "post",
  path: "/{id}/purge",
  operationId: "purgeModel",
  summary: "Cancel a model's queued jobs, `limit` (≤ 1 000) per call (admin)",
  description:
    "`{limit?, cursor?}` → `{canceled, next_cursor}`; call again with the cursor until it is null.",
  request: {
    params: ModelParams,
    body: { required: false, content: inline(PurgeRequest, "input") },
  },
  responses: {
    200: { description: "What this pass canceled", content: json("ModelPurged") },
    ...problems(401, 403, 404, 422),
  },
});

function servedModel(gateway: Gateway, id: string): string {
  if (!gateway.models.has(id)) throw notFound("Model", id);
  return id;
}

/** An empty body is the defaults; a body, when sent, must be valid. */
async function optionalBody<T extends z.ZodType>(
  c: Parameters<typeof parseJsonBody>[0],
  schema: T,
): Promise<z.infer<T>> {
  if ((c.req.header("content-length") ?? "0") === "0" && !c.req.header("content-type")) {
    return schema.parse({});
  }
  return parseJsonBody(c, schema);
}

/**
 * The operator's switches per model, under `/v1/admin/models` (admin scope). Pause: agents'
 * claims of the model's jobs are refused and the jobs wait; with `reject_new`, submits get
 * `503 model_paused`. Resume: the waiting jobs are released again, in fair order. Purge: cancels the
 * model's queued jobs, `limit` per call, resumable by `cursor`.
 */
export const adminModelRoutes = documented(
  new OpenAPIHono<AppEnv>(),
  pauseRoute,
  resumeRoute,
  purgeRoute,
)
  .post(pauseRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const model = servedModel(gateway, c.req.param("id"));
    const request = await optionalBody(c, PauseRequest);
    await gateway.stores.jobs.pauseModel(
      model,
      { rejectNew: request.reject_new, reason: request.reason ?? null },
      gateway.now(),
    );
    forgetSwitches(gateway);
    return c.json({ id: model, object: "model_state", ...(await modelState(gateway, model)) });
  })
  .post(resumeRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const model = servedModel(gateway, c.req.param("id"));
    await gateway.stores.jobs.resumeModel(model, gateway.now());
    forgetSwitches(gateway);
    // Its jobs go out again in fair order, within their tenants' max_running_jobs, as many
    // as its release window lets out (model-switches.ts `holdModel`).
    await gateway.stores.jobs.holdModel(model);
    const republished = await releaseModel(gateway, model).catch((error: unknown) => {
      gateway.log.warn({ model, err: String(error) }, "release pass failed; the sweep retries");
      return 0;
    });
    const state = await modelState(gateway, model);
    return c.json({ id: model, object: "model_state", ...state, republished });
  })
  .post(purgeRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const model = servedModel(gateway, c.req.param("id"));
    const request = await optionalBody(c, PurgeRequest);
    const now = gateway.now();
    const ids = await gateway.stores.jobs.queuedIds(
      model,
      request.cursor ?? null,
      request.limit + 1,
    );
    const batch = ids.slice(0, request.limit);
    // One statement for the pass, not one a job: on Workers an invocation may make 1 000 D1
    // queries at most (https://developers.cloudflare.com/d1/platform/limits/).
    const canceledJobs = await gateway.stores.jobs.bulk.cancel(
      batch.map((job) => job.id),
      now,
    );
    afterTransitions(gateway, canceledJobs);
    const canceled = canceledJobs.length;
    const next = ids.length > request.limit ? (batch.at(-1)?.id ?? null) : null;
    return c.json({ object: "purge", id: model, canceled, next_cursor: next });
  });
