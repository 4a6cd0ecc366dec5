import { Hono } from "hono";
import { HttpProblem } from "../shared/errors.ts";
import { modelSpecs } from "./config.ts";
import type { Gateway, GatewayRuntime } from "./context.ts";
import type { AppEnv } from "./env.ts";
import { CURSOR_SECRET_NAME, cursorTokens } from "./feed/cursor-token.ts";
import { TenantFeed } from "./feed/tenant-feed.ts";
import { allowedMethods } from "./http/allowed-methods.ts";
import { requireApiKey, requireScope } from "./http/auth.ts";
import { corsFor } from "./http/cors.ts";
import { jsonBodyLimit } from "./http/json-body.ts";
import { PAGE_HEADERS } from "./http/page-policy.ts";
import { answerWith, logFailure, problemFor, problemResponse } from "./http/problem.ts";
import { refuseNulInUrl } from "./http/url-nul.ts";
import { addressLimit } from "./limits/address-limit.ts";
import { cachedCounts } from "./limits/cached-count.ts";
import { rateLimit } from "./limits/rate-limit.ts";
import { JobNotifier } from "./notifier.ts";
import { agentRoutes } from "./routes/agent.ts";
import { agentBatchRoutes } from "./routes/agent-batch.ts";
import { AGENT_API_PREFIX } from "./routes/agent-calls.ts";
import { agentQueueRoutes } from "./routes/agent-queue.ts";
import { blobRoutes } from "./routes/blobs.ts";
import { consoleRoutes } from "./routes/console.ts";
import { metaRoutes } from "./routes/meta.ts";
import { v1Routes } from "./routes/v1.ts";
import { ttlCache } from "./ttl-cache.ts";
import { budgetHeader } from "./usage/budget.ts";

/**
 * How far apart a tenant's change feed reads start (feed/tenant-feed.ts): at most this much
 * later for a change that follows another closely, none for a lone one.
 */
const FEED_GATHER_MS = 5;

export function createGateway(runtime: GatewayRuntime): Gateway {
  const notifier = new JobNotifier();
  const { config } = runtime;
  // Workers: a read one request begins is its I/O, not another's to await (cached-count.ts).
  const shareReads = !runtime.isolatedRequests;
  return {
    ...runtime,
    feed: new TenantFeed(
      runtime.stores.events,
      notifier,
      {
        pollMs: config.feedPollMs,
        livePollMs: config.feedSafetyPollMs,
        pageSize: 500,
        gatherMs: FEED_GATHER_MS,
        isolated: runtime.isolatedRequests ?? false,
      },
      runtime.now,
    ),
    feedCursors: cursorTokens(
      () => runtime.stores.sharedSecret(CURSOR_SECRET_NAME, runtime.now()),
      runtime.cursorCipher,
    ),
    models: modelSpecs(runtime.config),
    notifier,
    apiKeys: ttlCache(runtime.config.apiKeyCacheMs, runtime.now, { shareLoads: shareReads }),
    agentRows: ttlCache(runtime.config.apiKeyCacheMs, runtime.now),
    admission: {
      queueDepth: cachedCounts(runtime.config.queueDepthCacheMs, runtime.now, { shareReads }),
      tenantQueued: cachedCounts(runtime.config.queueDepthCacheMs, runtime.now, { shareReads }),
    },
  };
}

/** The whole HTTP API, runtime-free: Node and Workers each wrap it in a small entry file. */
export function createApp(gateway: Gateway): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use(async (c, next) => {
    c.set("gateway", gateway);
    await next();
    // Any HTML this app answers carries the page policy (page-policy.ts), whichever route
    // made it; a response with a policy of its own (blobs: a sandbox) keeps it.
    const type = c.res.headers.get("content-type") ?? "";
    if (/^text\/html\b/i.test(type) && !c.res.headers.has("content-security-policy")) {
      c.res = new Response(c.res.body, c.res);
      for (const [name, value] of Object.entries(PAGE_HEADERS)) c.res.headers.set(name, value);
    }
  });
  app.onError((error, c) => {
    const answer = problemFor(error, c.req.path);
    logFailure(gateway.log, error, answer, c.req.path);
    return answerWith(c, answer);
  });
  const allowed = allowedMethods(app);
  app.notFound((c) => {
    const { method, path } = c.req;
    const allow = allowed(path);
    if (allow.length === 0 || allow.includes(method)) {
      return problemResponse(
        c,
        new HttpProblem(404, "not_found", "Not found", `No route ${method} ${path}.`),
      );
    }
    const methods = allow.join(", ");
    const detail = `${path} takes ${methods}, not ${method}.`;
    const problem = new HttpProblem(405, "method_not_allowed", "Method not allowed", detail);
    return problemResponse(c, problem, { allow: methods });
  });

  // Before the blobs and the API: a browser's preflight carries no key.
  const crossOrigin = corsFor(gateway.config.corsOrigins);
  if (crossOrigin) app.use("/v1/*", crossOrigin);
  // Blob bodies are bounded by their signed URLs; every other body is small JSON.
  if (gateway.localBlobs) app.route("/", blobRoutes(gateway.localBlobs));
  const jsonLimit = jsonBodyLimit(gateway);
  app.use("/v1/*", refuseNulInUrl);
  app.use("/v1/*", jsonLimit);
  app.use("/internal/*", jsonLimit);

  app.route("/", metaRoutes);
  app.route("/", consoleRoutes);
  app.route(AGENT_API_PREFIX, agentRoutes);
  app.route(AGENT_API_PREFIX, agentBatchRoutes);
  app.route(AGENT_API_PREFIX, agentQueueRoutes);
  // Who (401, and per address for requests without a valid key), then how often (429,
  // counted even for what the key may not do), then what (403).
  const api = new Hono<AppEnv>().use(
    addressLimit,
    requireApiKey,
    budgetHeader,
    rateLimit,
    requireScope(allowed),
  );
  api.route("/", v1Routes);
  app.route("/v1", api);
  return app;
}
