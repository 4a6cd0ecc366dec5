import { Hono } from "hono";
import { z } from "zod";
import { notFound } from "../../shared/errors.ts";
import { JobId } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { afterTransition, publishJob } from "../jobs/lifecycle.ts";
import { modelState } from "../jobs/model-state.ts";
import { forgetSwitches } from "../jobs/model-switches.ts";
import { parseJsonBody } from "../validation.ts";

const PauseRequest = z.strictObject({
  reject_new: z.boolean().default(false),
  reason: z.string().trim().min(1).max(500).optional(),
});

const PurgeRequest = z.strictObject({
  limit: z.number().int().min(1).max(1_000).default(500),
  // A job id, as next_cursor gives: garbage must not quietly restart the pass.
  cursor: JobId.optional(),
});

/** Republished at once on resume; the outbox sweep publishes any beyond. */
const RESUME_REPUBLISH = 1_000;

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
 * `503 model_paused`. Resume: the waiting jobs are published again. Purge: cancels the
 * model's queued jobs, `limit` per call, resumable by `cursor`.
 */
export const adminModelRoutes = new Hono<AppEnv>()
  .post("/:id/pause", async (c) => {
    const gateway = c.var.gateway;
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
  .post("/:id/resume", async (c) => {
    const gateway = c.var.gateway;
    const model = servedModel(gateway, c.req.param("id"));
    await gateway.stores.jobs.resumeModel(model, gateway.now());
    forgetSwitches(gateway);
    await gateway.stores.jobs.unpublishModel(model);
    let republished = 0;
    for (const row of await gateway.stores.jobs.unpublishedOfModel(model, RESUME_REPUBLISH)) {
      if (await publishJob(gateway, row)) republished++;
    }
    const state = await modelState(gateway, model);
    return c.json({ id: model, object: "model_state", ...state, republished });
  })
  .post("/:id/purge", async (c) => {
    const gateway = c.var.gateway;
    const model = servedModel(gateway, c.req.param("id"));
    const request = await optionalBody(c, PurgeRequest);
    const now = gateway.now();
    const ids = await gateway.stores.jobs.queuedIds(
      model,
      request.cursor ?? null,
      request.limit + 1,
    );
    const batch = ids.slice(0, request.limit);
    let canceled = 0;
    for (const { id, tenant_id } of batch) {
      const result = await gateway.stores.jobs.cancel(tenant_id, id, now);
      if (!result.ok) continue;
      canceled++;
      afterTransition(gateway, result.job);
    }
    const next = ids.length > request.limit ? (batch.at(-1)?.id ?? null) : null;
    return c.json({ object: "purge", id: model, canceled, next_cursor: next });
  });
