import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { notFound } from "../../shared/errors.ts";
import type { Model } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { refuseUnknownParameters } from "../http/validation.ts";
import { modelState } from "../jobs/model-state.ts";
import { jobTimeout } from "../jobs/timeout.ts";
import { queueBound } from "../limits/backpressure.ts";
import { inputJsonSchema, type ModelSpec, outputJsonSchema } from "../models.ts";
import { documented, json, problems } from "../openapi/parts.ts";
import type { Tenant } from "../store/tenants.ts";
import { maxUploadBytes } from "./uploads.ts";

/** A served model as `GET /v1/models` shows it, with the limits that apply to the caller. */
function modelView(gateway: Gateway, tenant: Tenant, spec: ModelSpec): Model {
  return {
    id: spec.id,
    object: "model",
    task: spec.task,
    description: spec.description,
    input_schema: inputJsonSchema(spec),
    /** What a succeeded job's `output` holds: the task catalog's output schema. */
    output_schema: outputJsonSchema(spec),
    content_types: [...spec.contentTypes],
    limits: {
      max_upload_bytes: maxUploadBytes(
        gateway.config.maxUploadBytes,
        tenant.limits.max_upload_bytes,
      ),
      max_image_pixels: spec.maxPixels,
      max_image_side: spec.maxSide,
      max_queue_depth: queueBound(gateway, spec.id),
      priority: { min: tenant.limits.priority_min, max: tenant.limits.priority_max },
      // A job's execution limit: what it gets when it names none, and the most it may ask.
      timeout_seconds: {
        default: jobTimeout(spec, tenant, undefined).seconds,
        max: tenant.limits.max_timeout_seconds,
      },
    },
  };
}

/** Any valid key may read the models, so the only refusal past the key is the rate. */
const limited = {
  429: {
    description:
      "Rate limited: retry after `Retry-After` seconds (RateLimit-* headers say how much is left).",
    headers: { "Retry-After": { schema: { type: "integer" as const } } },
  },
};
const listRoute = createRoute({
  method: "get",
  path: "/",
  operationId: "listModels",
  summary: "The models served, their input schema and your limits",
  description:
    "Each model runs a `task`; its `input_schema` and `output_schema` are also in the components as `<Task>Input` and `<Task>Output` (`OcrInput`, `BackgroundRemovalOutput`).",
  responses: {
    200: { description: "The models", content: json("ModelList") },
    ...problems(401),
    ...limited,
  },
});
const getRoute = createRoute({
  method: "get",
  path: "/{id}",
  operationId: "getModel",
  summary: "One model",
  request: { params: z.object({ id: z.string() }) },
  responses: {
    200: { description: "The model, with its live `state`", content: json("Model") },
    ...problems(401, 404),
    ...limited,
  },
});

/** `GET /v1/models` and `GET /v1/models/{id}`: mounted at /v1/models; any valid key. */
export const modelRoutes = documented(new OpenAPIHono<AppEnv>(), listRoute, getRoute)
  .get(listRoute.getRoutingPath(), (c) => {
    // A listing takes no filter: `?task=ocr` answered every model as though it had applied.
    refuseUnknownParameters(c.req.query(), []);
    const gateway = c.get("gateway");
    const tenant = c.get("tenant");
    const data = [...gateway.models.values()].map((spec) => modelView(gateway, tenant, spec));
    return c.json({ object: "list", data });
  })
  .get(getRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const tenant = c.get("tenant");
    const spec = gateway.models.get(c.req.param("id"));
    if (!spec) throw notFound("Model", c.req.param("id"));
    // Its live state (queued, running, agents, pace, waits, the operator's pause) costs a
    // few reads, so only the one-model view carries it.
    return c.json({
      ...modelView(gateway, tenant, spec),
      state: await modelState(gateway, spec.id),
    });
  });
