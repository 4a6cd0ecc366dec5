import { Hono } from "hono";
import { notFound } from "../../shared/errors.ts";
import {
  WebhookEndpointEnableRequest,
  type WebhookEndpointList,
  WebhookSecretRotateRequest,
} from "../../shared/protocol/webhook-api.ts";
import type { AppEnv } from "../env.ts";
import { parseJsonBody } from "../validation.ts";
import { toWebhookEndpoint, toWebhookSecretDetails } from "../webhooks/views.ts";

/** The tenant's webhook settings: signing secret (and its rotation), endpoint health. */
export const webhookRoutes = new Hono<AppEnv>()
  .get("/secret", async (c) => {
    const gateway = c.var.gateway;
    const state = await gateway.stores.webhooks.secretState(c.var.tenant.id, gateway.now());
    if (!state) throw notFound("Tenant", c.var.tenant.id);
    c.header("cache-control", "no-store");
    return c.json(toWebhookSecretDetails(state));
  })
  .post("/secret/rotate", async (c) => {
    const gateway = c.var.gateway;
    // The body is optional: an empty POST rotates with the default overlap.
    const empty = (await c.req.text()).trim() === "";
    const request = empty ? {} : await parseJsonBody(c, WebhookSecretRotateRequest);
    const state = await gateway.stores.webhooks.rotateSecret(c.var.tenant.id, {
      now: gateway.now(),
      ...(request.overlap_seconds === undefined
        ? {}
        : { overlapMs: request.overlap_seconds * 1000 }),
    });
    gateway.log.info(
      { tenant_id: c.var.tenant.id, previous_expires_at: state.previousExpiresAt },
      "webhook secret rotated",
    );
    c.header("cache-control", "no-store");
    return c.json(toWebhookSecretDetails(state));
  })
  .get("/endpoints", async (c) => {
    const endpoints = await c.var.gateway.stores.webhooks.endpoints(c.var.tenant.id);
    const body: WebhookEndpointList = { object: "list", data: endpoints.map(toWebhookEndpoint) };
    return c.json(body);
  })
  .post("/endpoints/enable", async (c) => {
    const gateway = c.var.gateway;
    const { url } = await parseJsonBody(c, WebhookEndpointEnableRequest);
    const endpoint = await gateway.stores.webhooks.enableEndpoint(
      c.var.tenant.id,
      url,
      gateway.now(),
    );
    if (!endpoint) throw notFound("Webhook endpoint", url);
    return c.json(toWebhookEndpoint(endpoint));
  });
