import { Hono } from "hono";
import type { WebhookSecret } from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { webhookSecretOf } from "../store/tenants.ts";

export const webhookRoutes = new Hono<AppEnv>().get("/secret", async (c) => {
  const secret = await webhookSecretOf(c.var.gateway.db, c.var.tenant.id);
  const body: WebhookSecret = { object: "webhook_secret", secret };
  c.header("cache-control", "no-store");
  return c.json(body);
});
