import { OpenAPIHono } from "@hono/zod-openapi";
import type { AppEnv } from "../env.ts";
import { adminRoutes } from "./admin.ts";
import { adminAgentRoutes } from "./admin-agents.ts";
import { adminDeadLetterRoutes } from "./admin-dead-letters.ts";
import { adminModelRoutes } from "./admin-models.ts";
import { batchRoutes } from "./batches.ts";
import { eventRoutes } from "./events.ts";
import { jobArtifactRoutes } from "./job-artifacts.ts";
import { jobEventRoutes } from "./job-events.ts";
import { jobInputRoutes } from "./job-inputs.ts";
import { jobRetryRoutes } from "./job-retry.ts";
import { batchWebhookRoutes, jobWebhookRoutes } from "./job-webhooks.ts";
import { jobRoutes } from "./jobs.ts";
import { modelRoutes } from "./models.ts";
import { uploadRoutes } from "./uploads.ts";
import { usageRoutes } from "./usage.ts";
import { webhookRoutes } from "./webhooks.ts";

/**
 * The public API under `/v1`, without its middleware (app.ts adds auth and limits). Its
 * OpenAPI registry, filled by each route file beside its handlers, is the document's paths.
 */
export const v1Routes = new OpenAPIHono<AppEnv>()
  .route("/uploads", uploadRoutes)
  .route("/jobs", jobRoutes)
  .route("/batches", batchRoutes)
  .route("/batches", batchWebhookRoutes)
  .route("/jobs", jobEventRoutes)
  .route("/jobs", jobRetryRoutes)
  .route("/jobs", jobWebhookRoutes)
  .route("/jobs", jobArtifactRoutes)
  .route("/jobs", jobInputRoutes)
  .route("/webhooks", webhookRoutes)
  .route("/events", eventRoutes)
  .route("/models", modelRoutes)
  .route("/admin/agents", adminAgentRoutes)
  .route("/admin/dead-letters", adminDeadLetterRoutes)
  .route("/admin/models", adminModelRoutes)
  .route("/admin", adminRoutes)
  .route("/", usageRoutes);
