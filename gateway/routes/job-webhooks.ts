import { Hono } from "hono";
import type { AppEnv } from "../env.ts";

/** A job's webhook deliveries: mounted at /v1/jobs (`/:id/webhooks`, `/:id/webhooks/:delivery/redeliver`). */
export const jobWebhookRoutes = new Hono<AppEnv>();
