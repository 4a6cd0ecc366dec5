import { z } from "zod";
import { parseAllowList } from "../shared/net/allow-list.ts";
import { BUILTIN_MODELS, type ModelSpec, ModelTask, specForTask } from "./models.ts";

/**
 * The release window's floor (gateway/jobs/release.ts). The window grows to the `prefetch`
 * a model's live agents register, which is what keeps them fed; the floor only covers jobs
 * on their way to agents that register none. Every job in it is one a tenant arriving behind
 * a flood waits behind: `bench/fairness.ts` on the embedded default, B's p95 over a lone
 * tenant's ×3.55 with 32 against ×2.25 with 8, and the shares and throughput of the weights
 * run held (5 918 jobs in 30 s with 8, 5 292 with 32).
 */
export const DEFAULT_RELEASE_WINDOW = 8;

/**
 * The fewest days the usage rollup may be kept: a budget is read from it over the month so
 * far (gateway/usage/budget.ts), so a shorter life would forget what the month spent.
 */
export const MIN_USAGE_RETENTION_DAYS = 31;

/**
 * The gateway's settings, runtime-free: each entry file (Node, Workers) reads its own
 * environment and hands the result here to be checked once at start-up.
 */
export const GatewayConfig = z
  .object({
    /** Where clients and agents reach this gateway; presigned disk URLs start with it. */
    publicUrl: z.url(),
    models: z.array(z.string()).min(1).default(["ocr"]),
    /**
     * The task of each configured model the gateway does not build in (models.yaml ids such
     * as `rmbg`): it decides the model's input schema and artifacts. May also re-task a
     * built-in id. Every id in `models` must be built in or named here.
     */
    modelTasks: z.record(z.string(), ModelTask).default({}),
    maxUploadBytes: z
      .number()
      .int()
      .positive()
      .default(20 * 1024 * 1024),
    maxBodyBytes: z
      .number()
      .int()
      .positive()
      .default(64 * 1024),
    /** `POST /v1/batches`' body: its 1 000 items with URLs and metadata pass 64 KiB. */
    maxBatchBodyBytes: z
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    uploadExpiresSeconds: z
      .number()
      .int()
      .positive()
      .default(15 * 60),
    defaultTtlSeconds: z
      .number()
      .int()
      .positive()
      .default(24 * 3600),
    /** How long an agent may go without a heartbeat before its job may be claimed again. */
    leaseSeconds: z.number().int().positive().default(60),
    agentToken: z.string().min(16),
    /** Embedded mode lets webhooks go to http:// and loopback receivers, for local testing. */
    allowInsecureWebhooks: z.boolean().default(false),
    /**
     * The operator's allow-lists (GANTRY_WEBHOOK_ALLOW, GANTRY_INPUT_URL_ALLOW): hosts and
     * CIDR ranges that webhooks may reach (over http too) and input URLs may name, although
     * the address policy refuses them by default. See shared/net/allow-list.ts.
     */
    webhookAllow: z.array(z.string()).default([]).superRefine(checkAllowList),
    inputUrlAllow: z.array(z.string()).default([]).superRefine(checkAllowList),
    /**
     * Browser origins that may call the API across origins (GANTRY_CORS_ORIGINS, checked
     * there): none by default, so only pages of the gateway's own origin (the console) can.
     */
    corsOrigins: z.array(z.string()).default([]),
    /**
     * Backpressure: the most jobs that may wait (ready, not yet taken) in one model's queue
     * before `POST /v1/jobs` answers 503; `queueBounds` sets it per model.
     */
    maxQueueDepth: z.number().int().positive().default(10_000),
    /** How long the hourly usage rollup is kept (gateway/store/usage.ts): 13 months. */
    usageRetentionDays: z.number().int().min(MIN_USAGE_RETENTION_DAYS).max(3660).default(396),
    /**
     * Fair release (gateway/jobs/release.ts): the most jobs of one model released to the
     * broker and not yet taken by an agent, or as many as its agents run at once when that
     * is more. The rest wait in the store, where they can still be ordered fairly.
     */
    releaseWindow: z.number().int().positive().default(DEFAULT_RELEASE_WINDOW),
    queueBounds: z.record(z.string(), z.number().int().positive()).default({}),
    /** How long a queue depth reading is reused, so each submit does not ask the broker. */
    queueDepthCacheMs: z.number().int().min(0).default(1_000),
    /**
     * How long a verified API key or agent is trusted without asking the database again. A
     * key or agent revoked through this gateway stops at once; one revoked elsewhere
     * (another replica, the CLI) within this long. 0 looks each up on every request.
     */
    apiKeyCacheMs: z.number().int().min(0).default(1_000),
    /** `Retry-After` on a 503 (queue full) or a 429 for too many queued jobs. */
    retryAfterSeconds: z.number().int().positive().default(5),
    /**
     * `GET /v1/events`: how far back `Last-Event-ID` may reach (older answers 410), and how
     * many streams one tenant may hold open on one gateway.
     */
    eventsResumeWindowSeconds: z.number().int().positive().default(3_600),
    maxEventStreamsPerTenant: z.number().int().positive().default(100),
    /**
     * How long an event stream lasts before the gateway ends it (clients resume with
     * `Last-Event-ID`): `GET /v1/events` this long, a job's stream at most 5 minutes. Shorter
     * on Workers (runtime/workers/settings.ts), where a stream's reads count against one
     * invocation's D1 queries.
     */
    maxStreamSeconds: z.number().int().positive().default(900),
    /** `GET /v1/jobs/{id}/events`: streams one tenant may hold open on one gateway. */
    maxJobStreamsPerTenant: z.number().int().positive().default(1_000),
    /** Events one stream may fall behind before it gets `stream_overflow` and is closed. */
    eventsStreamBuffer: z.number().int().positive().default(1_000),
    /**
     * How often open streams re-read the store when no cross-gateway change feed is live
     * (Workers, or a gateway told to poll), and the safety net's period while one is.
     */
    feedPollMs: z.number().int().positive().default(1_000),
    feedSafetyPollMs: z.number().int().positive().default(30_000),
  })
  .superRefine((config, context) => {
    const unknown = config.models.filter(
      (id) => !(id in config.modelTasks || id in BUILTIN_MODELS),
    );
    if (unknown.length > 0) {
      context.addIssue({
        code: "custom",
        path: ["models"],
        message: `models ${unknown.join(", ")} are not built in (${Object.keys(BUILTIN_MODELS).join(", ")}): give each a task`,
      });
    }
  });
export type GatewayConfig = z.infer<typeof GatewayConfig>;
export type GatewayConfigInput = z.input<typeof GatewayConfig>;

export function modelSpecs(config: GatewayConfig): Map<string, ModelSpec> {
  return new Map(
    config.models.flatMap((id) => {
      const task = config.modelTasks[id];
      const spec = task ? specForTask(id, task) : BUILTIN_MODELS[id];
      return spec ? [[id, spec] as const] : [];
    }),
  );
}

function checkAllowList(entries: string[], context: z.RefinementCtx): void {
  try {
    parseAllowList(entries);
  } catch (error) {
    context.addIssue({ code: "custom", message: (error as Error).message });
  }
}
