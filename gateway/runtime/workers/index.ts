/**
 * The Cloudflare Workers entry: the only gateway file, beside `runtime/node`, that knows its
 * runtime (with its `worker-*.ts` helpers). D1 always holds the jobs. The queue is SQS when
 * `GANTRY_QUEUE_URL` names one, else the `sql` queue on D1; blobs live in S3 (presigned S3
 * URLs: clients and agents upload straight to the bucket) when `GANTRY_S3_BUCKET` is set,
 * else in R2 behind the gateway's own signed `/v1/blobs` URLs. A cron trigger runs the
 * sweeper and webhook retries. See `settings.ts` for every setting.
 *
 * A missing or bad setting answers a 500 problem+json that names it, rather than a trace.
 */
import type { BlobStore } from "../../../shared/blob/port.ts";
import { createR2BlobStore } from "../../../shared/blob/r2.ts";
import { createS3BlobStore } from "../../../shared/blob/s3.ts";
import { openD1 } from "../../../shared/db/d1.ts";
import { migrate } from "../../../shared/db/migrations.ts";
import type { OpenedDatabase } from "../../../shared/db/open.ts";
import { ConfigurationError, HttpProblem } from "../../../shared/errors.ts";
import type { JobQueue } from "../../../shared/queue/port.ts";
import { createSqlQueue, type QueueLeases } from "../../../shared/queue/sql/index.ts";
import { createSqsQueue } from "../../../shared/queue/sqs/index.ts";
import { createApp, createGateway } from "../../app.ts";
import { answeringOutages } from "../../blob-outage.ts";
import type { Gateway } from "../../context.ts";
import { answerResponse, problemFor } from "../../http/problem.ts";
import { webhookDeps } from "../../jobs/lifecycle.ts";
import { limitAnonymousByAddress } from "../../limits/address-limit.ts";
import { createKyselyStores } from "../../store/kysely-stores.ts";
import { ensureTenantWithKey } from "../../store/tenants.ts";
import { sweep } from "../../sweep/index.ts";
import { createWebhookDispatcher } from "../../webhooks/dispatcher.ts";
import { newWebhookSecret } from "../../webhooks/secret.ts";
import { workerAddressOf } from "./address-limit.ts";
import { type DurableNamespaceLike, shareLimitsThroughDurableObject } from "./durable-buckets.ts";
import { workerLog as log, logFailure } from "./log.ts";
import { readWorkerSettings, type WorkerEnv, type WorkerSettings } from "./settings.ts";

// The Durable Object class wrangler.toml binds as RATE_LIMITS: Workers find it among the
// entry module's exports.
export { GantryRateLimiter } from "./durable-limiter.ts";
export type { WorkerEnv } from "./settings.ts";

/** The slices of Workers' ExecutionContext and ScheduledController this file uses. */
interface WorkerContext {
  waitUntil(work: Promise<unknown>): void;
}
interface ScheduledEventLike {
  cron: string;
  scheduledTime: number;
}

const BOOTSTRAP_TENANT = "ten_default";
// The sweeper mints no URLs, so a cron run without GANTRY_PUBLIC_URL can use a stand-in.
const SWEEPER_URL = "https://sweeper.invalid";

/**
 * What lives as long as the isolate: the database handle, the migration (run once, retried
 * on the next request if it failed) and one gateway, so the in-memory job notifier, the
 * SQS queue-URL cache and the S3 client are shared by every request this isolate serves.
 */
interface IsolateState {
  db: OpenedDatabase["db"];
  ready: Promise<void> | null;
  /** Built by the first request that finds every setting valid. */
  shared: { gateway: Gateway; settings: WorkerSettings } | null;
}
const isolates = new WeakMap<WorkerEnv, IsolateState>();

/**
 * The isolate's gateway, fitted to one request (its waitUntil, and its origin if need be):
 * `origin` is the public URL when GANTRY_PUBLIC_URL is unset.
 */
async function gatewayFor(env: WorkerEnv, origin: string, ctx: WorkerContext) {
  const state = isolateState(env);
  if (!state.shared) {
    const settings = readWorkerSettings(env, origin);
    state.ready ??= prepare(state.db, settings.bootstrap).catch((error: unknown) => {
      state.ready = null;
      throw error;
    });
    await state.ready;
    state.shared ??= { gateway: buildGateway(state.db, settings, env.RATE_LIMITS), settings };
  }
  const { gateway, settings } = state.shared;
  const publicUrl = settings.publicUrl ?? origin;
  // waitUntil belongs to one request: background work started for it must be tied to it.
  const scoped: Gateway = {
    ...gateway,
    background: (work) => ctx.waitUntil(work.catch(logFailure("background work failed"))),
  };
  if (publicUrl === gateway.config.publicUrl) return { gateway: scoped, settings };
  // Without GANTRY_PUBLIC_URL each request's origin is its public URL. Only R2's URLs start
  // with it; S3's presigned URLs point at the bucket whatever the origin.
  const config = { ...gateway.config, publicUrl };
  const blobs = settings.blobs.kind === "r2" ? r2Store(settings.blobs, publicUrl) : gateway.blobs;
  return { gateway: { ...scoped, blobs, config }, settings };
}

function buildGateway(
  db: OpenedDatabase["db"],
  settings: WorkerSettings,
  rateLimits: DurableNamespaceLike | undefined,
): Gateway {
  const { config, limits } = settings;
  const onError = logFailure("queue error");
  let queue: JobQueue;
  let queueLeases: QueueLeases | undefined;
  if (settings.queue.kind === "sqs") {
    const { url, credentials } = settings.queue;
    // A publisher only: `close` is never called, the isolate's end drops the client.
    queue = createSqsQueue({ ...url, credentials, limits, onError });
  } else {
    const sqlQueue = createSqlQueue(db, {
      dialect: "sqlite",
      limits,
      onError,
      isolatedRequests: true,
    });
    queue = sqlQueue;
    // No agent can reach D1: they take the jobs from the gateway (routes/agent-queue.ts).
    queueLeases = sqlQueue.leases;
  }
  let blobs: BlobStore;
  let localBlobs: Gateway["localBlobs"];
  if (settings.blobs.kind === "s3") {
    blobs = answeringOutages(createS3BlobStore(settings.blobs.options), log);
  } else {
    const r2 = r2Store(settings.blobs, config.publicUrl);
    blobs = r2;
    localBlobs = { backend: r2, secret: settings.blobs.secret };
  }
  const gateway = createGateway({
    // D1 takes at most 100 bound parameters a statement: the stores' default.
    stores: createKyselyStores(db, { isolatedRequests: true }),
    queue,
    ...(queueLeases ? { queueLeases } : {}),
    blobs,
    config,
    log,
    now: Date.now,
    // Bound: workerd refuses a `fetch` called with another `this` ("Illegal invocation").
    fetch: fetch.bind(globalThis),
    background: (work) => void work.catch(logFailure("background work failed")),
    // Only R2 blobs are served by the gateway; with S3 there is no `/v1/blobs` route.
    ...(localBlobs ? { localBlobs } : {}),
    isolatedRequests: true,
  });
  // Requests without a valid key are limited per CF-Connecting-IP; with the RATE_LIMITS
  // Durable Object bound, these and the tenants' buckets hold across isolates.
  limitAnonymousByAddress(gateway, workerAddressOf);
  if (rateLimits) shareLimitsThroughDurableObject(gateway, rateLimits);
  return gateway;
}

function r2Store(choice: Extract<WorkerSettings["blobs"], { kind: "r2" }>, publicUrl: string) {
  return createR2BlobStore({
    bucket: choice.bucket,
    publicBaseUrl: publicUrl,
    secret: choice.secret,
  });
}

function isolateState(env: WorkerEnv): IsolateState {
  let state = isolates.get(env);
  if (!state) {
    if (!env.DB) {
      throw new ConfigurationError(
        "DB",
        'The D1 binding "DB" is missing: add it to wrangler.toml.',
      );
    }
    state = { db: openD1(env.DB).db, ready: null, shared: null };
    isolates.set(env, state);
  }
  return state;
}

async function prepare(
  db: OpenedDatabase["db"],
  bootstrap: WorkerSettings["bootstrap"],
): Promise<void> {
  const applied = await migrate(db, "sqlite");
  if (applied.length > 0) log.info({ applied }, "database migrated");
  const { apiKey, webhookSecret } = bootstrap;
  if (apiKey) {
    await ensureTenantWithKey(db, {
      id: BOOTSTRAP_TENANT,
      name: "default",
      apiKey,
      // Used only when the tenant is first created; a later change of this secret is ignored.
      webhookSecret: webhookSecret ?? newWebhookSecret(),
    });
  }
}

async function handleFetch(
  request: Request,
  env: WorkerEnv,
  ctx: WorkerContext,
): Promise<Response> {
  const url = new URL(request.url);
  let gateway: Gateway;
  try {
    ({ gateway } = await gatewayFor(env, url.origin, ctx));
  } catch (error) {
    if (error instanceof ConfigurationError) {
      log.error({ setting: error.setting, err: error.message }, "gateway misconfigured");
      // `setting` lets a deploy check name the variable without parsing the sentence.
      return answerResponse(problemFor(error, url.pathname));
    }
    logFailure("gateway start failed")(error);
    const detail = "The gateway could not reach its database. Try again shortly.";
    const unavailable = new HttpProblem(503, "unavailable", "Service unavailable", detail);
    return answerResponse(problemFor(unavailable, url.pathname));
  }
  // The app is built per request because the gateway it closes over is per request (its
  // waitUntil); that is cheap next to a D1 round trip.
  const assets = env.ASSETS;
  return createApp(
    assets ? { ...gateway, assets: workerAssets(assets, url.origin) } : gateway,
  ).fetch(request);
}

/**
 * Workers serve files that exist straight from static assets; what reaches the Worker is
 * the console's own routes (its index.html) and the files the core asks for by path.
 */
function workerAssets(binding: NonNullable<WorkerEnv["ASSETS"]>, origin: string) {
  return async (path: string): Promise<Response | null> => {
    const response = await binding.fetch(new Request(new URL(path, origin)));
    return response.ok ? response : null;
  };
}

async function handleScheduled(event: ScheduledEventLike, env: WorkerEnv, ctx: WorkerContext) {
  try {
    const { gateway, settings } = await gatewayFor(env, SWEEPER_URL, ctx);
    // Due webhook deliveries go out beside the sweep, not inside it: an endpoint that never
    // answers holds one slot for its timeout, never the sweep (webhooks/dispatcher.ts).
    const dispatcher = createWebhookDispatcher(
      () => gateway.stores.webhooks,
      () => webhookDeps(gateway),
      { onError: logFailure("webhook delivery failed") },
    );
    ctx.waitUntil(
      dispatcher
        .tick()
        .then(async (started) => {
          await dispatcher.drain();
          if (started > 0) log.info({ cron: event.cron, started }, "webhooks sent");
        })
        .catch(logFailure("webhook dispatch failed")),
    );
    const report = await sweep(gateway, { maxAttempts: settings.limits.maxAttempts });
    log.info({ cron: event.cron, ...report }, "sweep done");
  } catch (error) {
    // Rethrown so the cron run shows as failed in the dashboard; the log says why.
    if (error instanceof ConfigurationError) {
      log.error({ setting: error.setting, err: error.message }, "sweep skipped: misconfigured");
    } else {
      logFailure("sweep failed")(error);
    }
    throw error;
  }
}

export default {
  fetch: handleFetch,
  scheduled: handleScheduled,
};
