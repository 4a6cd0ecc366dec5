import { Hono } from "hono";
import { notFound } from "../../shared/errors.ts";
import { queueBound } from "../backpressure.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { modelState } from "../jobs/model-state.ts";
import { jobTimeout } from "../jobs/timeout.ts";
import { inputJsonSchema, type ModelSpec, outputJsonSchema } from "../models.ts";
import type { Tenant } from "../store/tenants.ts";
import { maxUploadBytes } from "./uploads.ts";

/** A served model as `GET /v1/models` shows it, with the limits that apply to the caller. */
function modelView(gateway: Gateway, tenant: Tenant, spec: ModelSpec) {
  return {
    id: spec.id,
    object: "model" as const,
    task: spec.task,
    description: spec.description,
    input_schema: inputJsonSchema(spec),
    /** What a succeeded job's `output` holds: the task catalog's output schema. */
    output_schema: outputJsonSchema(spec),
    content_types: spec.contentTypes,
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

/** `GET /v1/models` and `GET /v1/models/{id}`: mounted at /v1/models; any valid key. */
export const modelRoutes = new Hono<AppEnv>()
  .get("/", (c) => {
    const { gateway, tenant } = c.var;
    const data = [...gateway.models.values()].map((spec) => modelView(gateway, tenant, spec));
    return c.json({ object: "list", data });
  })
  .get("/:id", async (c) => {
    const { gateway, tenant } = c.var;
    const spec = gateway.models.get(c.req.param("id"));
    if (!spec) throw notFound("Model", c.req.param("id"));
    // Its live state (queued, running, agents, pace, waits, the operator's pause) costs a
    // few reads, so only the one-model view carries it.
    return c.json({
      ...modelView(gateway, tenant, spec),
      state: await modelState(gateway, spec.id),
    });
  });
