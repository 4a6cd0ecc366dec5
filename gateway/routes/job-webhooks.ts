import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import type { WebhookDeliveryList } from "../../shared/protocol/webhook-api.ts";
import type { AppEnv } from "../env.ts";
import { refuseUnknownParameters } from "../http/validation.ts";
import { webhookDeps } from "../jobs/lifecycle.ts";
import { tenantJob } from "../jobs/tenant-job.ts";
import { documented, JobIdParams, json, problems } from "../openapi/parts.ts";
import { redeliver } from "../webhooks/redeliver.ts";
import { toWebhookDelivery } from "../webhooks/views.ts";

const deliveriesRoute = createRoute({
  method: "get",
  path: "/{id}/webhooks",
  operationId: "listJobWebhookDeliveries",
  summary: "List a job's webhook deliveries and their attempts",
  request: { params: JobIdParams },
  responses: {
    200: { description: "Deliveries, oldest first", content: json("WebhookDeliveryList") },
    ...problems(401, 403, 404, 422),
  },
});
const redeliverRoute = createRoute({
  method: "post",
  path: "/{id}/webhooks/{delivery_id}/redeliver",
  operationId: "redeliverWebhook",
  summary: "Send a webhook delivery again",
  description:
    "One more attempt now: same payload and webhook-id, fresh signature, even to a disabled endpoint (a success re-enables it). Answers once the attempt is made.",
  request: {
    params: JobIdParams.extend({ delivery_id: z.string().regex(/^whd_/) }),
  },
  responses: {
    202: { description: "The delivery with its new attempt", content: json("WebhookDelivery") },
    ...problems(401, 403, 404, 409),
  },
});

/**
 * A job's webhook deliveries, mounted at /v1/jobs. Another tenant's job is a 404 here as
 * everywhere: the job is looked up for the caller's tenant before anything else.
 */
export const jobWebhookRoutes = documented(
  new OpenAPIHono<AppEnv>(),
  deliveriesRoute,
  redeliverRoute,
)
  .get(deliveriesRoute.getRoutingPath(), async (c) => {
    // No filters: `?state=failed` would otherwise answer every delivery as though it had.
    refuseUnknownParameters(c.req.query(), []);
    const gateway = c.get("gateway");
    const id = c.req.param("id");
    await tenantJob(gateway, c.get("tenant").id, id);
    const deliveries = await gateway.stores.webhooks.deliveries(c.get("tenant").id, id);
    const body: WebhookDeliveryList = { object: "list", data: deliveries.map(toWebhookDelivery) };
    return c.json(body);
  })
  .post(redeliverRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const tenantId = c.get("tenant").id;
    const jobId = c.req.param("id");
    const deliveryId = c.req.param("delivery_id");
    await tenantJob(gateway, tenantId, jobId);
    // The attempt is made before answering (it is bounded by the 15 s webhook timeout), so
    // the answer already shows how it went.
    const result = await redeliver(
      gateway.stores.webhooks,
      { tenantId, jobId, deliveryId },
      webhookDeps(gateway),
    );
    if (result.kind === "not_found") throw notFound("Webhook delivery", deliveryId);
    if (result.kind === "busy") {
      throw new HttpProblem(
        409,
        "delivery_busy",
        "Delivery busy",
        "Another attempt at this delivery started just now; list the job's webhooks to see it.",
      );
    }
    const view = (await gateway.stores.webhooks.deliveries(tenantId, jobId)).find(
      (d) => d.id === deliveryId,
    );
    if (!view) throw notFound("Webhook delivery", deliveryId);
    return c.json(toWebhookDelivery(view), 202);
  });
