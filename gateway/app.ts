import { Hono } from "hono";
import { HttpProblem, UserError } from "../shared/errors.ts";
import { requireApiKey, requireScope } from "./auth.ts";
import { cachedCounts } from "./cached-count.ts";
import { modelSpecs } from "./config.ts";
import type { Gateway, GatewayRuntime } from "./context.ts";
import type { AppEnv } from "./env.ts";
import { TenantFeed } from "./feed/tenant-feed.ts";
import { jsonBodyLimit } from "./json-body.ts";
import { addressLimit } from "./limits/address-limit.ts";
import { JobNotifier } from "./notifier.ts";
import { answerWith, problemFor, problemResponse } from "./problem.ts";
import { rateLimit } from "./rate-limit.ts";
import { adminRoutes } from "./routes/admin.ts";
import { adminAgentRoutes } from "./routes/admin-agents.ts";
import { adminDeadLetterRoutes } from "./routes/admin-dead-letters.ts";
import { adminModelRoutes } from "./routes/admin-models.ts";
import { agentRoutes } from "./routes/agent.ts";
import { agentBatchRoutes } from "./routes/agent-batch.ts";
import { batchRoutes } from "./routes/batches.ts";
import { blobRoutes } from "./routes/blobs.ts";
import { consoleRoutes } from "./routes/console.ts";
import { eventRoutes } from "./routes/events.ts";
import { jobArtifactRoutes } from "./routes/job-artifacts.ts";
import { jobEventRoutes } from "./routes/job-events.ts";
import { jobInputRoutes } from "./routes/job-inputs.ts";
import { jobRetryRoutes } from "./routes/job-retry.ts";
import { jobWebhookRoutes } from "./routes/job-webhooks.ts";
import { jobRoutes } from "./routes/jobs.ts";
import { metaRoutes } from "./routes/meta.ts";
import { modelRoutes } from "./routes/models.ts";
import { uploadRoutes } from "./routes/uploads.ts";
import { webhookRoutes } from "./routes/webhooks.ts";
import { ttlCache } from "./ttl-cache.ts";

export function createGateway(runtime: GatewayRuntime): Gateway {
  const notifier = new JobNotifier();
  const { config } = runtime;
  return {
    ...runtime,
    feed: new TenantFeed(
      runtime.stores.events,
      notifier,
      {
        pollMs: config.feedPollMs,
        livePollMs: config.feedSafetyPollMs,
        pageSize: 500,
        isolated: runtime.isolatedRequests ?? false,
      },
      runtime.now,
    ),
    models: modelSpecs(runtime.config),
    notifier,
    apiKeys: ttlCache(runtime.config.apiKeyCacheMs, runtime.now),
    agentRows: ttlCache(runtime.config.apiKeyCacheMs, runtime.now),
    admission: {
      queueDepth: cachedCounts(runtime.config.queueDepthCacheMs, runtime.now),
      tenantQueued: cachedCounts(runtime.config.queueDepthCacheMs, runtime.now),
    },
  };
}

/** The whole HTTP API, runtime-free: Node and Workers each wrap it in a small entry file. */
export function createApp(gateway: Gateway): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use(async (c, next) => {
    c.set("gateway", gateway);
    await next();
  });
  app.onError((error, c) => {
    const answer = problemFor(error, c.req.path);
    if (answer.internal) {
      gateway.log.error(
        { err: error instanceof Error ? error.stack : String(error), path: c.req.path },
        "internal error",
      );
    } else if (error instanceof UserError) {
      gateway.log.error({ err: error.message, path: c.req.path }, "gateway misconfigured");
    }
    return answerWith(c, answer);
  });
  app.notFound((c) =>
    problemResponse(
      c,
      new HttpProblem(404, "not_found", "Not found", `No route ${c.req.method} ${c.req.path}.`),
    ),
  );

  // Blob bodies are bounded by their signed URLs; every other body is small JSON.
  if (gateway.localBlobs) app.route("/", blobRoutes(gateway.localBlobs));
  const jsonLimit = jsonBodyLimit(gateway);
  app.use("/v1/*", jsonLimit);
  app.use("/internal/*", jsonLimit);

  app.route("/", metaRoutes);
  app.route("/", consoleRoutes);
  app.route("/internal/v1", agentRoutes);
  app.route("/internal/v1", agentBatchRoutes);
  // Who (401, and per address for requests without a valid key), then how often (429,
  // counted even for what the key may not do), then what (403).
  const api = new Hono<AppEnv>().use(addressLimit, requireApiKey, rateLimit, requireScope);
  api.route("/uploads", uploadRoutes);
  api.route("/jobs", jobRoutes);
  api.route("/batches", batchRoutes);
  api.route("/jobs", jobEventRoutes);
  api.route("/jobs", jobRetryRoutes);
  api.route("/jobs", jobWebhookRoutes);
  api.route("/jobs", jobArtifactRoutes);
  api.route("/jobs", jobInputRoutes);
  api.route("/webhooks", webhookRoutes);
  api.route("/events", eventRoutes);
  api.route("/models", modelRoutes);
  api.route("/admin/agents", adminAgentRoutes);
  api.route("/admin/dead-letters", adminDeadLetterRoutes);
  api.route("/admin/models", adminModelRoutes);
  api.route("/admin", adminRoutes);
  app.route("/v1", api);
  return app;
}
