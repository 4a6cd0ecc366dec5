import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import type { WebhookDeliveryList } from "../../shared/protocol/webhook-api.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { refuseUnknownParameters } from "../http/validation.ts";
import { webhookDeps } from "../jobs/lifecycle.ts";
import { tenantJob } from "../jobs/tenant-job.ts";
import { BatchIdParams, documented, JobIdParams, json, problems } from "../openapi/parts.ts";
import { redeliver } from "../webhooks/redeliver.ts";
import { toWebhookDelivery } from "../webhooks/views.ts";

/**
 * What webhook deliveries stand under: a job (its `job.*` events) or a batch (its
 * `batch.completed`, stored with the batch's id where a job's would be). Each has the same
 * two routes, a log and a redelivery, under its own path.
 */
interface DeliveryOwner {
  /** In operation ids and summaries: `Job`, `Batch`. */
  name: "Job" | "Batch";
  params: z.ZodObject<{ id: z.ZodString }>;
  /** Throws the 404 unless the tenant has it: another tenant's is unknown here too. */
  assertOwned(gateway: Gateway, tenantId: string, id: string): Promise<void>;
}

function deliveryRoutes(owner: DeliveryOwner) {
  const word = owner.name.toLowerCase();
  const deliveriesRoute = createRoute({
    method: "get",
    path: "/{id}/webhooks",
    operationId: `list${owner.name}WebhookDeliveries`,
    summary: `List a ${word}'s webhook deliveries and their attempts`,
    request: { params: owner.params },
    responses: {
      200: { description: "Deliveries, oldest first", content: json("WebhookDeliveryList") },
      ...problems(401, 403, 404, 422),
    },
  });
  const redeliverRoute = createRoute({
    method: "post",
    path: "/{id}/webhooks/{delivery_id}/redeliver",
    operationId: owner.name === "Job" ? "redeliverWebhook" : `redeliver${owner.name}Webhook`,
    summary: `Send a ${word}'s webhook delivery again`,
    description:
      "One more attempt now: same payload and webhook-id, fresh signature, even to a disabled endpoint (a success re-enables it). Answers once the attempt is made.",
    request: {
      params: owner.params.extend({ delivery_id: z.string().regex(/^whd_/) }),
    },
    responses: {
      202: { description: "The delivery with its new attempt", content: json("WebhookDelivery") },
      ...problems(401, 403, 404, 409),
    },
  });

  return documented(new OpenAPIHono<AppEnv>(), deliveriesRoute, redeliverRoute)
    .get(deliveriesRoute.getRoutingPath(), async (c) => {
      // No filters: `?state=failed` would otherwise answer every delivery as though it had.
      refuseUnknownParameters(c.req.query(), []);
      const gateway = c.get("gateway");
      const id = c.req.param("id");
      await owner.assertOwned(gateway, c.get("tenant").id, id);
      const deliveries = await gateway.stores.webhooks.deliveries(c.get("tenant").id, id);
      const body: WebhookDeliveryList = {
        object: "list",
        data: deliveries.map(toWebhookDelivery),
      };
      return c.json(body);
    })
    .post(redeliverRoute.getRoutingPath(), async (c) => {
      const gateway = c.get("gateway");
      const tenantId = c.get("tenant").id;
      const ownerId = c.req.param("id");
      const deliveryId = c.req.param("delivery_id");
      await owner.assertOwned(gateway, tenantId, ownerId);
      // The attempt is made before answering (it is bounded by the 15 s webhook timeout), so
      // the answer already shows how it went.
      const result = await redeliver(
        gateway.stores.webhooks,
        { tenantId, jobId: ownerId, deliveryId },
        webhookDeps(gateway),
      );
      if (result.kind === "not_found") throw notFound("Webhook delivery", deliveryId);
      if (result.kind === "busy") {
        throw new HttpProblem(
          409,
          "delivery_busy",
          "Delivery busy",
          `Another attempt at this delivery started just now; list the ${word}'s webhooks to see it.`,
        );
      }
      const view = (await gateway.stores.webhooks.deliveries(tenantId, ownerId)).find(
        (d) => d.id === deliveryId,
      );
      if (!view) throw notFound("Webhook delivery", deliveryId);
      return c.json(toWebhookDelivery(view), 202);
    });
}

/** A job's webhook deliveries, mounted at /v1/jobs. */
export const jobWebhookRoutes = deliveryRoutes({
  name: "Job",
  params: JobIdParams,
  assertOwned: async (gateway, tenantId, id) => {
    await tenantJob(gateway, tenantId, id);
  },
});

/** A batch's `batch.completed` deliveries, mounted at /v1/batches. */
export const batchWebhookRoutes = deliveryRoutes({
  name: "Batch",
  params: BatchIdParams,
  assertOwned: async (gateway, tenantId, id) => {
    if (!(await gateway.stores.jobs.batchForTenant(tenantId, id))) throw notFound("Batch", id);
  },
});
