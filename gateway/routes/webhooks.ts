import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import { notFound } from "../../shared/errors.ts";
import {
  WebhookEndpointEnableRequest,
  type WebhookEndpointList,
  WebhookSecretRotateRequest,
} from "../../shared/protocol/webhook-api.ts";
import type { AppEnv } from "../env.ts";
import { parseJsonBody, refuseUnknownParameters } from "../http/validation.ts";
import { documented, json, problems } from "../openapi/parts.ts";
import { toWebhookEndpoint, toWebhookSecretDetails } from "../webhooks/views.ts";

const secretRoute = createRoute({
  method: "get",
  path: "/secret",
  operationId: "getWebhookSecret",
  summary: "Your webhook signing secret",
  responses: {
    200: {
      description: "The secret (whsec_…), and when a rotated-out one stops signing",
      content: json("WebhookSecretDetails"),
    },
    ...problems(401),
  },
});
const rotateRoute = createRoute({
  method: "post",
  path: "/secret/rotate",
  operationId: "rotateWebhookSecret",
  summary: "Rotate the webhook signing secret",
  description:
    "The old secret keeps signing beside the new one for overlap_seconds (default 24 h); webhook-signature then carries both.",
  request: { body: { required: false, content: json("WebhookSecretRotateRequest") } },
  responses: {
    200: { description: "The new secret", content: json("WebhookSecretDetails") },
    ...problems(400, 401, 403, 409, 415, 422),
  },
});
const endpointsRoute = createRoute({
  method: "get",
  path: "/endpoints",
  operationId: "listWebhookEndpoints",
  summary: "Webhook endpoint health, and why one is disabled",
  responses: {
    200: { description: "Endpoints", content: json("WebhookEndpointList") },
    ...problems(401, 403, 422),
  },
});
const enableRoute = createRoute({
  method: "post",
  path: "/endpoints/enable",
  operationId: "enableWebhookEndpoint",
  summary: "Re-enable a disabled endpoint",
  request: { body: { required: true, content: json("WebhookEndpointEnableRequest") } },
  responses: {
    200: { description: "The endpoint", content: json("WebhookEndpoint") },
    ...problems(401, 403, 404, 415, 422),
  },
});

/** The tenant's webhook settings: signing secret (and its rotation), endpoint health. */
export const webhookRoutes = documented(
  new OpenAPIHono<AppEnv>(),
  secretRoute,
  rotateRoute,
  endpointsRoute,
  enableRoute,
)
  .get(secretRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const state = await gateway.stores.webhooks.secretState(c.get("tenant").id, gateway.now());
    if (!state) throw notFound("Tenant", c.get("tenant").id);
    c.header("cache-control", "no-store");
    return c.json(toWebhookSecretDetails(state));
  })
  .post(rotateRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    // The body is optional: an empty POST rotates with the default overlap.
    const empty = (await c.req.text()).trim() === "";
    const request = empty ? {} : await parseJsonBody(c, WebhookSecretRotateRequest);
    const state = await gateway.stores.webhooks.rotateSecret(c.get("tenant").id, {
      now: gateway.now(),
      ...(request.overlap_seconds === undefined
        ? {}
        : { overlapMs: request.overlap_seconds * 1000 }),
    });
    gateway.log.info(
      { tenant_id: c.get("tenant").id, previous_expires_at: state.previousExpiresAt },
      "webhook secret rotated",
    );
    c.header("cache-control", "no-store");
    return c.json(toWebhookSecretDetails(state));
  })
  .get(endpointsRoute.getRoutingPath(), async (c) => {
    // No filters: `?status=disabled` would otherwise answer every endpoint as though it had.
    refuseUnknownParameters(c.req.query(), []);
    const endpoints = await c.get("gateway").stores.webhooks.endpoints(c.get("tenant").id);
    const body: WebhookEndpointList = { object: "list", data: endpoints.map(toWebhookEndpoint) };
    return c.json(body);
  })
  .post(enableRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const { url } = await parseJsonBody(c, WebhookEndpointEnableRequest);
    const endpoint = await gateway.stores.webhooks.enableEndpoint(
      c.get("tenant").id,
      url,
      gateway.now(),
    );
    if (!endpoint) throw notFound("Webhook endpoint", url);
    return c.json(toWebhookEndpoint(endpoint));
  });
