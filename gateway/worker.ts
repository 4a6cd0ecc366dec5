/**
 * The Cloudflare Workers entry: the only gateway file, beside `node.ts`, that knows its
 * runtime. D1 holds the jobs and the `sql` queue, R2 holds the blobs (served through the
 * gateway's signed `/v1/blobs` URLs), and a cron trigger runs the sweeper.
 *
 * Settings come from `wrangler.toml` vars and `wrangler secret put`; a missing or bad one
 * answers a 500 problem+json that names it, rather than a stack trace.
 */
import type { D1Database } from "@cloudflare/workers-types";
import { Kysely } from "kysely";
import { D1Dialect } from "kysely-d1";
import { createR2BlobStore, type R2BucketLike } from "../shared/blob/r2.ts";
import { migrate } from "../shared/db/migrations.ts";
import type { Database } from "../shared/db/schema.ts";
import { createSqlQueue } from "../shared/queue/sql.ts";
import { createApp, createGateway } from "./app.ts";
import { GatewayConfig } from "./config.ts";
import type { Gateway, Log } from "./context.ts";
import { BUILTIN_MODELS } from "./models.ts";
import { PROBLEM_BASE } from "./problem.ts";
import { ensureTenantWithKey } from "./store/tenants.ts";
import { sweep } from "./sweep.ts";
import { newWebhookSecret } from "./webhooks/secret.ts";

export interface WorkerEnv {
  DB?: D1Database;
  BLOBS?: R2BucketLike;
  /** Optional: defaults to the origin of each request. */
  GANTRY_PUBLIC_URL?: string;
  /** Secret: the token agents send to `/internal/v1`. */
  GANTRY_AGENT_TOKEN?: string;
  /** Secret: signs blob URLs. */
  GANTRY_BLOB_SECRET?: string;
  /** Comma list of model ids; "ocr" by default. */
  GANTRY_MODELS?: string;
  /** Secret, optional: makes sure tenant `ten_default` exists with this API key. */
  GANTRY_BOOTSTRAP_API_KEY?: string;
  /** Secret, optional: the bootstrap tenant's webhook secret (`whsec_…`). */
  GANTRY_WEBHOOK_SECRET?: string;
}

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

/** A setting or binding is missing or wrong: the operator's fix, not a bug. */
class ConfigurationError extends Error {
  override readonly name = "ConfigurationError";
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(message);
  }
}

/** JSON lines on the console: what Workers Logs and `wrangler tail` pick up. */
const log: Log = {
  info: (fields, message) => console.log(logLine("info", fields, message)),
  warn: (fields, message) => console.warn(logLine("warn", fields, message)),
  error: (fields, message) => console.error(logLine("error", fields, message)),
};

function logLine(level: string, fields: object, message: string): string {
  return JSON.stringify({ level, time: new Date().toISOString(), msg: message, ...fields });
}

/**
 * What lives as long as the isolate: the database handle, the migration (run once, retried
 * on the next request if it failed) and one gateway, so the in-memory job notifier is
 * shared by every request this isolate serves.
 */
interface IsolateState {
  db: Kysely<Database>;
  ready: Promise<void> | null;
  /** Built by the first request that finds every setting valid. */
  shared: { gateway: Gateway; bucket: R2BucketLike; blobSecret: string } | null;
}
const isolates = new WeakMap<WorkerEnv, IsolateState>();

/** The isolate's gateway, fitted to one request (its waitUntil, and its origin if need be). */
async function gatewayFor(env: WorkerEnv, publicUrl: string, ctx: WorkerContext): Promise<Gateway> {
  const state = isolateState(env);
  if (!state.shared) {
    const settings = readSettings(env, publicUrl);
    state.ready ??= prepare(state.db, env).catch((error: unknown) => {
      state.ready = null;
      throw error;
    });
    await state.ready;
    state.shared ??= {
      gateway: createGateway({
        db: state.db,
        queue: createSqlQueue(state.db, {
          dialect: "sqlite",
          onError: (error) => log.error({ err: String(error) }, "queue error"),
        }),
        blobs: settings.blobs,
        config: settings.config,
        log,
        now: Date.now,
        // Bound: workerd refuses a `fetch` called with another `this` ("Illegal invocation").
        fetch: fetch.bind(globalThis),
        background: (work) => void work.catch(logBackgroundFailure),
        localBlobs: { backend: settings.blobs, secret: settings.blobSecret },
      }),
      bucket: settings.bucket,
      blobSecret: settings.blobSecret,
    };
  }
  const { gateway, bucket, blobSecret } = state.shared;
  // waitUntil belongs to one request: background work started for it must be tied to it.
  const scoped: Gateway = {
    ...gateway,
    background: (work) => ctx.waitUntil(work.catch(logBackgroundFailure)),
  };
  if (publicUrl === gateway.config.publicUrl) return scoped;
  // Without GANTRY_PUBLIC_URL each request's origin is its public URL; only minted URLs change.
  const blobs = createR2BlobStore({ bucket, publicBaseUrl: publicUrl, secret: blobSecret });
  return { ...scoped, blobs, config: { ...gateway.config, publicUrl } };
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
    const db = new Kysely<Database>({ dialect: new D1Dialect({ database: env.DB }) });
    state = { db, ready: null, shared: null };
    isolates.set(env, state);
  }
  return state;
}

async function prepare(db: Kysely<Database>, env: WorkerEnv): Promise<void> {
  const applied = await migrate(db, "sqlite");
  if (applied.length > 0) log.info({ applied }, "database migrated");
  const apiKey = env.GANTRY_BOOTSTRAP_API_KEY;
  if (apiKey) {
    await ensureTenantWithKey(db, {
      id: BOOTSTRAP_TENANT,
      name: "default",
      apiKey,
      // Used only when the tenant is first created; a later change of this secret is ignored.
      webhookSecret: env.GANTRY_WEBHOOK_SECRET || newWebhookSecret(),
    });
  }
}

/** Reads and checks every setting; throws a ConfigurationError naming the first bad one. */
function readSettings(env: WorkerEnv, publicUrl: string) {
  const bucket = env.BLOBS;
  if (!bucket) {
    throw new ConfigurationError(
      "BLOBS",
      'The R2 binding "BLOBS" is missing: add it to wrangler.toml.',
    );
  }
  const blobSecret = secret(env, "GANTRY_BLOB_SECRET");
  const models = (env.GANTRY_MODELS ?? "ocr")
    .split(",")
    .map((model) => model.trim())
    .filter(Boolean);
  const unknown = models.filter((model) => !(model in BUILTIN_MODELS));
  if (unknown.length > 0) {
    const known = Object.keys(BUILTIN_MODELS).join(", ");
    throw new ConfigurationError(
      "GANTRY_MODELS",
      `GANTRY_MODELS names unknown models (${unknown.join(", ")}); known: ${known}.`,
    );
  }
  const parsed = GatewayConfig.safeParse({
    publicUrl,
    models,
    agentToken: secret(env, "GANTRY_AGENT_TOKEN"),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const setting = SETTING_NAMES[String(issue?.path[0])] ?? "configuration";
    throw new ConfigurationError(
      setting,
      `${setting} is invalid: ${issue?.message ?? "bad value"}.`,
    );
  }
  const blobs = createR2BlobStore({ bucket, publicBaseUrl: publicUrl, secret: blobSecret });
  return { bucket, blobs, blobSecret, config: parsed.data };
}

const SETTING_NAMES: Record<string, string> = {
  publicUrl: "GANTRY_PUBLIC_URL",
  models: "GANTRY_MODELS",
  agentToken: "GANTRY_AGENT_TOKEN",
};

function secret(env: WorkerEnv, name: "GANTRY_AGENT_TOKEN" | "GANTRY_BLOB_SECRET"): string {
  const value = env[name];
  if (typeof value !== "string" || value.length === 0) {
    throw new ConfigurationError(name, `${name} is not set: run \`wrangler secret put ${name}\`.`);
  }
  if (value.length < 16) {
    throw new ConfigurationError(name, `${name} must be at least 16 characters long.`);
  }
  return value;
}

function logBackgroundFailure(error: unknown): void {
  log.error(
    { err: error instanceof Error ? error.stack : String(error) },
    "background work failed",
  );
}

function problem(status: number, code: string, title: string, detail: string, instance: string) {
  const body = { type: PROBLEM_BASE + code, title, status, code, detail, instance };
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/problem+json" },
  });
}

async function handleFetch(
  request: Request,
  env: WorkerEnv,
  ctx: WorkerContext,
): Promise<Response> {
  const url = new URL(request.url);
  let gateway: Gateway;
  try {
    gateway = await gatewayFor(env, env.GANTRY_PUBLIC_URL || url.origin, ctx);
  } catch (error) {
    if (error instanceof ConfigurationError) {
      log.error({ setting: error.setting, err: error.message }, "gateway misconfigured");
      return problem(500, "misconfigured", "Gateway misconfigured", error.message, url.pathname);
    }
    log.error(
      { err: error instanceof Error ? error.stack : String(error) },
      "gateway start failed",
    );
    const detail = "The gateway could not reach its database. Try again shortly.";
    return problem(503, "unavailable", "Service unavailable", detail, url.pathname);
  }
  // The app is built per request because the gateway it closes over is per request (its
  // waitUntil); that is cheap next to a D1 round trip.
  return createApp(gateway).fetch(request);
}

async function handleScheduled(event: ScheduledEventLike, env: WorkerEnv, ctx: WorkerContext) {
  const gateway = await gatewayFor(env, env.GANTRY_PUBLIC_URL || SWEEPER_URL, ctx);
  const report = await sweep(gateway);
  log.info({ cron: event.cron, ...report }, "sweep done");
}

export default {
  fetch: handleFetch,
  scheduled: handleScheduled,
};
