/**
 * The Workers gateway's settings: `wrangler.toml` vars and Workers secrets, read and checked
 * once per isolate from one table (WORKER_SETTINGS; docs/settings.md is generated from it).
 * Every bad or missing setting becomes a ConfigurationError that names it, which the entry
 * answers as a 500 problem+json (never a stack trace). The queue and blob adapters are
 * chosen from them in adapters.ts.
 */
import type { D1Database } from "@cloudflare/workers-types";
import type { R2BucketLike } from "../../../shared/blob/r2.ts";
import { S3_SETTINGS } from "../../../shared/blob/s3-settings.ts";
import { ConfigurationError } from "../../../shared/errors.ts";
import { ModelId } from "../../../shared/protocol/job.ts";
import { parseSqsQueueUrl } from "../../../shared/queue/sqs/url.ts";
import {
  infoOf,
  readSettings,
  type SettingProblem,
  setting,
  settingProblem,
} from "../../../shared/settings/index.ts";
import {
  allowList,
  flag,
  httpUrl,
  list,
  originList,
  parsed,
  text,
  wholeNumber,
} from "../../../shared/settings/values.ts";
import { DEFAULT_RELEASE_WINDOW, GatewayConfig } from "../../config.ts";
import { parseQueueBounds } from "../../limits/queue-bound-settings.ts";
import { BUILTIN_MODELS, type ModelTask, parseModelTasks } from "../../models.ts";
import { checkedWebhookSecret } from "../../webhooks/secret.ts";
import { type BlobChoice, chooseBlobs, chooseQueue, type QueueChoice } from "./adapters.ts";
import type { DurableNamespaceLike } from "./durable-buckets.ts";

/** The Worker's bindings, beside the vars and secrets of WORKER_SETTINGS. */
export interface WorkerBindings {
  DB?: D1Database;
  BLOBS?: R2BucketLike;
  /** wrangler.toml `[assets]`: the console's files (dist/web), Workers static assets. */
  ASSETS?: { fetch(request: Request): Promise<Response> };
  /**
   * The Durable Object namespace of class GantryRateLimiter (wrangler.toml): when bound, a
   * tenant's rate limit and the per-address limit hold across isolates; else per isolate.
   */
  RATE_LIMITS?: DurableNamespaceLike;
}

/** What a Worker is handed: its bindings, and its vars and secrets by name. */
export type WorkerEnv = WorkerBindings & Readonly<Record<string, unknown>>;

export { ConfigurationError };

/** A secret as `wrangler secret put` stores it (a trailing newline trimmed off). */
const workerSecret = (min: number) =>
  text().min(min, `must be at least ${min} characters long`).optional();

/** Every var and secret of the Workers gateway: its name, default and what it is for. */
export const WORKER_SETTINGS = {
  publicUrl: setting(
    "GANTRY_PUBLIC_URL",
    httpUrl().optional(),
    "Where clients and agents reach the gateway; R2 blob URLs start with it.",
    { shownDefault: "each request's own origin" },
  ),
  agentToken: setting(
    "GANTRY_AGENT_TOKEN",
    text().min(16, "must be at least 16 characters long"),
    "Secret (`wrangler secret put GANTRY_AGENT_TOKEN`), 16 characters or more: the fleet's enrollment token agents send to `/internal/v1`.",
    { secret: true },
  ),
  blobSecret: setting(
    "GANTRY_BLOB_SECRET",
    workerSecret(16),
    "Secret, 16 characters or more, required with R2 blobs: signs blob URLs.",
    { secret: true },
  ),
  models: setting(
    "GANTRY_MODELS",
    list(ModelId).prefault("ocr"),
    "Models the gateway accepts, comma-separated: built in, or given a task in `GANTRY_MODEL_TASKS`.",
  ),
  modelTasks: setting(
    "GANTRY_MODEL_TASKS",
    parsed(parseModelTasks).prefault(""),
    "The task of each model id not built in, as the agents' models.yaml: `rmbg=background-removal,yolo=detection`.",
  ),
  bootstrapApiKey: setting(
    "GANTRY_BOOTSTRAP_API_KEY",
    workerSecret(16), // an admin key: held to what Node asks of GANTRY_API_KEY
    "Secret, optional, 16 characters or more: makes sure tenant `ten_default` exists with this API key (every scope).",
    { secret: true },
  ),
  webhookSecret: setting(
    "GANTRY_WEBHOOK_SECRET",
    parsed((value) => checkedWebhookSecret(value.trim())).optional(),
    "Secret, optional: the bootstrap tenant's webhook secret when it is first made: `whsec_` then the base64 of 24 or more random bytes.",
    { secret: true, shownDefault: "generated" },
  ),
  queue: setting(
    "GANTRY_QUEUE_URL",
    parsed((url) => {
      // amqp and postgres need TCP drivers the Worker does not bundle; D1 is the `sql` queue.
      if (!url.trim().toLowerCase().startsWith("sqs:")) {
        throw new Error(
          "must be an sqs:// URL on Workers (leave it unset for the sql queue on D1)",
        );
      }
      return parseSqsQueueUrl(url.trim());
    }).optional(),
    "`sqs://<region>[/<prefix>][?endpoint=…&create=false]`: SQS instead of the `sql` queue on D1 (the prefix is Terraform's queue_name_prefix).",
    { secret: true, shownDefault: "the `sql` queue on D1" },
  ),
  ...S3_SETTINGS,
  awsAccessKeyId: setting(
    "AWS_ACCESS_KEY_ID",
    text().optional(),
    "Secret, with SQS or S3 (Workers have no other AWS credentials): the gateway's IAM user.",
    { secret: true },
  ),
  awsSecretAccessKey: setting(
    "AWS_SECRET_ACCESS_KEY",
    text().optional(),
    "Secret, with `AWS_ACCESS_KEY_ID`.",
    { secret: true },
  ),
  maxAttempts: setting(
    "GANTRY_MAX_ATTEMPTS",
    wholeNumber(1, 100).prefault("5"),
    "Deliveries before a job is dead-lettered; keep equal to the agents' `GANTRY_MAX_ATTEMPTS`.",
  ),
  // SQS counts visibility in whole seconds, up to 12 hours.
  leaseSeconds: setting(
    "GANTRY_LEASE_SECONDS",
    wholeNumber(1, 12 * 3600).prefault("60"),
    "The agents' lease in whole seconds; keep equal to the agents' `GANTRY_LEASE_SECONDS`.",
  ),
  maxQueueDepth: setting(
    "GANTRY_MAX_QUEUE_DEPTH",
    wholeNumber(1).prefault("10000"),
    "Waiting jobs per model before `POST /v1/jobs` answers `503 queue_full`.",
  ),
  releaseWindow: setting(
    "GANTRY_RELEASE_WINDOW",
    wholeNumber(1, 100_000).prefault(String(DEFAULT_RELEASE_WINDOW)),
    "Jobs of one model handed to the queue and not yet taken, or as many as its agents run or read ahead when more; the rest wait in D1 in fair order.",
  ),
  maxQueueDepthByModel: setting(
    "GANTRY_MAX_QUEUE_DEPTH_BY_MODEL",
    text().optional(),
    "`ocr=500,noop=100000`: the bound of single models.",
  ),
  webhookAllow: setting(
    "GANTRY_WEBHOOK_ALLOW",
    allowList().prefault(""),
    "Internal webhook receivers (hosts, CIDRs) the URL policy lets through, over http too; checked at submission (Workers' fetch reaches no private network).",
  ),
  inputUrlAllow: setting(
    "GANTRY_INPUT_URL_ALLOW",
    allowList().prefault(""),
    "Private input hosts (hosts, CIDRs) tenants' input URLs may name; give agents the same value.",
  ),
  corsOrigins: setting(
    "GANTRY_CORS_ORIGINS",
    originList().prefault(""),
    "Browser origins that may call the API (`https://app.example.com,…`, or `*`); unset, the Worker's own origin only.",
  ),
  allowInsecureWebhooks: setting(
    "GANTRY_ALLOW_INSECURE_WEBHOOKS",
    flag().prefault("false"),
    "`wrangler dev` and tests only: webhooks may go to http:// and local receivers. Never in production.",
  ),
};

/** Reads and checks every setting; throws a ConfigurationError naming the first bad one. */
export function readWorkerSettings(env: WorkerEnv, fallbackPublicUrl: string) {
  const read = readSettings(WORKER_SETTINGS, { env });
  if (!read.ok) throw configurationError(read.problems);
  const s = read.settings;
  checkModels(s.models, s.modelTasks);
  const parsedConfig = GatewayConfig.safeParse({
    publicUrl: s.publicUrl ?? fallbackPublicUrl,
    models: s.models,
    modelTasks: s.modelTasks,
    agentToken: s.agentToken,
    leaseSeconds: s.leaseSeconds,
    maxQueueDepth: s.maxQueueDepth,
    releaseWindow: s.releaseWindow,
    queueBounds: queueBounds(s.maxQueueDepthByModel, s.models),
    webhookAllow: s.webhookAllow,
    inputUrlAllow: s.inputUrlAllow,
    corsOrigins: s.corsOrigins,
    allowInsecureWebhooks: s.allowInsecureWebhooks,
    maxStreamSeconds: 240, // D1's 1 000 queries an invocation, at ~2 a second (config.ts)
  });
  if (!parsedConfig.success) {
    const issue = parsedConfig.error.issues[0];
    const where = issue?.path.join(".") ?? "configuration";
    throw new ConfigurationError(
      "configuration",
      `${where} is invalid: ${issue?.message ?? "bad value"}.`,
    );
  }
  const queue: QueueChoice = chooseQueue(s);
  const blobs: BlobChoice = chooseBlobs(s, env.BLOBS);
  return {
    config: parsedConfig.data,
    /** GANTRY_PUBLIC_URL as set; unset: each request's origin is its public URL. */
    publicUrl: s.publicUrl,
    limits: { maxAttempts: s.maxAttempts, leaseMs: s.leaseSeconds * 1000 },
    queue,
    blobs,
    /** The tenant `ten_default` made on first use, when GANTRY_BOOTSTRAP_API_KEY is set. */
    bootstrap: { apiKey: s.bootstrapApiKey, webhookSecret: s.webhookSecret },
  };
}

export type WorkerSettings = ReturnType<typeof readWorkerSettings>;

/** `rmbg=background-removal, yolo=detection`: a models.yaml id and its task, per pair. */
export function readModelTasks(raw: string | undefined): Record<string, ModelTask> {
  const read = readSettings(
    { modelTasks: WORKER_SETTINGS.modelTasks },
    { env: { GANTRY_MODEL_TASKS: raw } },
  );
  if (!read.ok) throw configurationError(read.problems);
  return read.settings.modelTasks;
}

function checkModels(models: string[], modelTasks: Record<string, ModelTask>): void {
  const unknown = models.filter((model) => !(model in BUILTIN_MODELS || model in modelTasks));
  if (unknown.length === 0) return;
  const known = Object.keys(BUILTIN_MODELS).join(", ");
  throw configurationError([
    settingProblem(
      infoOf(WORKER_SETTINGS.models),
      `names unknown models (${unknown.join(", ")}); built in: ${known}. Give other ids a task in GANTRY_MODEL_TASKS (id=task).`,
    ),
  ]);
}

function queueBounds(raw: string | undefined, models: string[]): Record<string, number> {
  try {
    return parseQueueBounds(raw, models);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw configurationError([
      settingProblem(infoOf(WORKER_SETTINGS.maxQueueDepthByModel), message),
    ]);
  }
}

/** The first problem, as the error the entry answers with (`setting` names it). */
export function configurationError(problems: readonly SettingProblem[]): ConfigurationError {
  const first = problems[0];
  const line = first?.line ?? "configuration is invalid";
  return new ConfigurationError(
    first?.setting ?? "configuration",
    line.endsWith(".") ? line : `${line}.`,
  );
}
