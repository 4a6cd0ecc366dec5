/**
 * The Workers gateway's settings: `wrangler.toml` vars, Workers secrets and bindings, read
 * and checked once per isolate. Every bad or missing setting becomes a ConfigurationError
 * that names it, which the entry answers as a 500 problem+json (never a stack trace).
 *
 * Adapters are chosen here:
 * - queue: `GANTRY_QUEUE_URL=sqs://…` selects SQS; unset keeps the `sql` queue on D1.
 * - blobs: `GANTRY_S3_BUCKET` (with `GANTRY_S3_REGION`, and optionally `GANTRY_S3_ENDPOINT`,
 *   `GANTRY_S3_FORCE_PATH_STYLE`, `GANTRY_S3_KEY_PREFIX`) selects S3 and presigned S3 URLs;
 *   unset keeps R2 (`BLOBS`) behind the gateway's own signed `/v1/blobs` URLs.
 * S3 and SQS share the `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` secrets: Workers have
 * no instance role or credentials file for the SDK to find.
 */
import type { D1Database } from "@cloudflare/workers-types";
import type { R2BucketLike } from "../shared/blob/r2.ts";
import type { S3BlobStoreOptions } from "../shared/blob/s3.ts";
import { ConfigurationError } from "../shared/errors.ts";
import type { QueueLimits } from "../shared/queue/port.ts";
import { parseSqsQueueUrl, type SqsQueueUrlParts } from "../shared/queue/sqs-url.ts";
import { GatewayConfig } from "./config.ts";
import { BUILTIN_MODELS, type ModelTask, parseModelTasks } from "./models.ts";
import { type AdmissionEnv, readAdmission } from "./worker-admission.ts";

/** A var as wrangler hands it over: TOML strings stay strings, numbers and booleans do not. */
type Var = string | number | boolean;

export interface WorkerEnv extends AdmissionEnv {
  DB?: D1Database;
  BLOBS?: R2BucketLike;
  /** wrangler.toml `[assets]`: the console's files (dist/web), Workers static assets. */
  ASSETS?: { fetch(request: Request): Promise<Response> };
  /** Optional: defaults to the origin of each request. */
  GANTRY_PUBLIC_URL?: string;
  /** Secret: the fleet's enrollment token agents send to `/internal/v1`. */
  GANTRY_AGENT_TOKEN?: string;
  /** Secret, with R2 blobs: signs blob URLs. */
  GANTRY_BLOB_SECRET?: string;
  /** Comma list of model ids; "ocr" by default. */
  GANTRY_MODELS?: string;
  /** The task of each model id not built in, as the agents' models.yaml: `rmbg=background-removal,yolo=detection`. */
  GANTRY_MODEL_TASKS?: string;
  /** Secret, optional: makes sure tenant `ten_default` exists with this API key. */
  GANTRY_BOOTSTRAP_API_KEY?: string;
  /** Secret, optional: the bootstrap tenant's webhook secret (`whsec_…`). */
  GANTRY_WEBHOOK_SECRET?: string;
  /** `sqs://<region>[/<prefix>][?endpoint=…&create=false]`; unset: the `sql` queue on D1. */
  GANTRY_QUEUE_URL?: string;
  GANTRY_S3_BUCKET?: string;
  GANTRY_S3_REGION?: string;
  GANTRY_S3_ENDPOINT?: string;
  GANTRY_S3_FORCE_PATH_STYLE?: Var;
  GANTRY_S3_KEY_PREFIX?: string;
  /** Secrets, with S3 or SQS. */
  AWS_ACCESS_KEY_ID?: string;
  AWS_SECRET_ACCESS_KEY?: string;
  /** Deliveries before a job is dead-lettered; the agents' GANTRY_MAX_ATTEMPTS. Default 5. */
  GANTRY_MAX_ATTEMPTS?: Var;
  /** The agents' lease in whole seconds; the agents' GANTRY_LEASE_SECONDS. Default 60. */
  GANTRY_LEASE_SECONDS?: Var;
  /** `wrangler dev` and tests only: webhooks may go to http:// and local receivers. */
  GANTRY_ALLOW_INSECURE_WEBHOOKS?: Var;
}

export { ConfigurationError };

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export type QueueChoice =
  | { kind: "sql" }
  | { kind: "sqs"; url: SqsQueueUrlParts; credentials: AwsCredentials };

export type BlobChoice =
  | { kind: "r2"; bucket: R2BucketLike; secret: string }
  | { kind: "s3"; options: S3BlobStoreOptions };

export interface WorkerSettings {
  config: GatewayConfig;
  limits: QueueLimits;
  queue: QueueChoice;
  blobs: BlobChoice;
}

const S3_SETTINGS = [
  "GANTRY_S3_REGION",
  "GANTRY_S3_ENDPOINT",
  "GANTRY_S3_FORCE_PATH_STYLE",
  "GANTRY_S3_KEY_PREFIX",
] as const;

/** Reads and checks every setting; throws a ConfigurationError naming the first bad one. */
export function readWorkerSettings(env: WorkerEnv, publicUrl: string): WorkerSettings {
  const modelTasks = readModelTasks(env.GANTRY_MODEL_TASKS);
  const models = readModels(env.GANTRY_MODELS, modelTasks);
  const agentToken = secret(env, "GANTRY_AGENT_TOKEN");
  const maxAttempts = wholeNumber(env, "GANTRY_MAX_ATTEMPTS", 5, 1, 100);
  // SQS counts visibility in whole seconds, up to 12 hours.
  const leaseSeconds = wholeNumber(env, "GANTRY_LEASE_SECONDS", 60, 1, 12 * 3600);
  const parsed = GatewayConfig.safeParse({
    ...readAdmission(env, models, (name, message) => new ConfigurationError(name, message)),
    publicUrl,
    models,
    modelTasks,
    agentToken,
    leaseSeconds,
    allowInsecureWebhooks: flag(env, "GANTRY_ALLOW_INSECURE_WEBHOOKS", false),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const setting = SETTING_NAMES[String(issue?.path[0])] ?? "configuration";
    throw new ConfigurationError(
      setting,
      `${setting} is invalid: ${issue?.message ?? "bad value"}.`,
    );
  }
  return {
    config: parsed.data,
    limits: { maxAttempts, leaseMs: leaseSeconds * 1000 },
    queue: readQueue(env),
    blobs: readBlobs(env),
  };
}

const SETTING_NAMES: Record<string, string> = {
  publicUrl: "GANTRY_PUBLIC_URL",
  models: "GANTRY_MODELS",
  modelTasks: "GANTRY_MODEL_TASKS",
  agentToken: "GANTRY_AGENT_TOKEN",
};

function readModels(raw: string | undefined, modelTasks: Record<string, ModelTask>): string[] {
  const models = (raw ?? "ocr")
    .split(",")
    .map((model) => model.trim())
    .filter(Boolean);
  const unknown = models.filter((model) => !(model in BUILTIN_MODELS || model in modelTasks));
  if (unknown.length > 0) {
    const known = Object.keys(BUILTIN_MODELS).join(", ");
    throw new ConfigurationError(
      "GANTRY_MODELS",
      `GANTRY_MODELS names unknown models (${unknown.join(", ")}); built in: ${known}. ` +
        "Give other ids a task in GANTRY_MODEL_TASKS (id=task).",
    );
  }
  return models;
}

/** `rmbg=background-removal, yolo=detection`: a models.yaml id and its task, per pair. */
export function readModelTasks(raw: string | undefined): Record<string, ModelTask> {
  try {
    return parseModelTasks(raw);
  } catch (error) {
    throw new ConfigurationError("GANTRY_MODEL_TASKS", (error as Error).message);
  }
}

function readQueue(env: WorkerEnv): QueueChoice {
  const raw = text(env.GANTRY_QUEUE_URL);
  if (raw === undefined) return { kind: "sql" };
  if (!raw.toLowerCase().startsWith("sqs:")) {
    // amqp and postgres need TCP drivers the Worker does not bundle; D1 is the `sql` queue.
    throw new ConfigurationError(
      "GANTRY_QUEUE_URL",
      "GANTRY_QUEUE_URL must be an sqs:// URL on Workers (leave it unset for the sql queue on D1).",
    );
  }
  let url: SqsQueueUrlParts;
  try {
    url = parseSqsQueueUrl(raw);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigurationError("GANTRY_QUEUE_URL", `GANTRY_QUEUE_URL ${reason}.`);
  }
  return { kind: "sqs", url, credentials: awsCredentials(env, "the SQS queue") };
}

function readBlobs(env: WorkerEnv): BlobChoice {
  const bucketName = text(env.GANTRY_S3_BUCKET);
  if (bucketName === undefined) {
    const stray = S3_SETTINGS.find((name) => text(env[name]) !== undefined);
    if (stray) {
      throw new ConfigurationError(
        "GANTRY_S3_BUCKET",
        `${stray} is set but GANTRY_S3_BUCKET is not: set the bucket to keep blobs in S3, or unset ${stray} to keep them in R2.`,
      );
    }
    if (!env.BLOBS) {
      throw new ConfigurationError(
        "BLOBS",
        'No blob store: add the R2 binding "BLOBS" to wrangler.toml, or set GANTRY_S3_BUCKET and GANTRY_S3_REGION for S3.',
      );
    }
    return { kind: "r2", bucket: env.BLOBS, secret: secret(env, "GANTRY_BLOB_SECRET") };
  }
  const region = text(env.GANTRY_S3_REGION);
  if (region === undefined) {
    throw new ConfigurationError(
      "GANTRY_S3_REGION",
      "GANTRY_S3_REGION is not set: the bucket's region, such as eu-west-1 (auto for R2).",
    );
  }
  const options: S3BlobStoreOptions = {
    bucket: bucketName,
    region,
    forcePathStyle: flag(env, "GANTRY_S3_FORCE_PATH_STYLE", false),
    credentials: awsCredentials(env, "the S3 bucket"),
  };
  const endpoint = text(env.GANTRY_S3_ENDPOINT);
  if (endpoint !== undefined) options.endpoint = httpUrl("GANTRY_S3_ENDPOINT", endpoint);
  const keyPrefix = text(env.GANTRY_S3_KEY_PREFIX);
  if (keyPrefix !== undefined) {
    if (keyPrefix.startsWith("/") || keyPrefix.split("/").includes("..")) {
      throw new ConfigurationError(
        "GANTRY_S3_KEY_PREFIX",
        "GANTRY_S3_KEY_PREFIX must not start with '/' or contain '..'.",
      );
    }
    options.keyPrefix = keyPrefix;
  }
  return { kind: "s3", options };
}

function awsCredentials(env: WorkerEnv, forWhat: string): AwsCredentials {
  for (const name of ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] as const) {
    if (text(env[name]) === undefined) {
      throw new ConfigurationError(
        name,
        `${name} is not set: ${forWhat} needs it (Workers have no other AWS credentials); run \`wrangler secret put ${name}\`.`,
      );
    }
  }
  return {
    accessKeyId: text(env.AWS_ACCESS_KEY_ID) ?? "",
    secretAccessKey: text(env.AWS_SECRET_ACCESS_KEY) ?? "",
  };
}

function secret(env: WorkerEnv, name: "GANTRY_AGENT_TOKEN" | "GANTRY_BLOB_SECRET"): string {
  const value = text(env[name]);
  if (value === undefined) {
    throw new ConfigurationError(name, `${name} is not set: run \`wrangler secret put ${name}\`.`);
  }
  if (value.length < 16) {
    throw new ConfigurationError(name, `${name} must be at least 16 characters long.`);
  }
  return value;
}

/** A var's text, trimmed; undefined when unset or empty (an empty var means "default"). */
function text(value: Var | undefined): string | undefined {
  if (value === undefined) return undefined;
  const trimmed = String(value).trim();
  return trimmed === "" ? undefined : trimmed;
}

function flag(
  env: WorkerEnv,
  name: "GANTRY_S3_FORCE_PATH_STYLE" | "GANTRY_ALLOW_INSECURE_WEBHOOKS",
  fallback: boolean,
): boolean {
  const value = text(env[name]);
  if (value === undefined) return fallback;
  if (value === "true" || value === "false") return value === "true";
  throw new ConfigurationError(name, `${name} must be true or false, not "${value}".`);
}

function wholeNumber(
  env: WorkerEnv,
  name: "GANTRY_MAX_ATTEMPTS" | "GANTRY_LEASE_SECONDS",
  fallback: number,
  min: number,
  max: number,
): number {
  const value = text(env[name]);
  if (value === undefined) return fallback;
  const number = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(number >= min && number <= max)) {
    throw new ConfigurationError(
      name,
      `${name} must be a whole number from ${min} to ${max}, not "${value}".`,
    );
  }
  return number;
}

function httpUrl(name: string, value: string): string {
  let url: URL | null = null;
  try {
    url = new URL(value);
  } catch {
    // reported below
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new ConfigurationError(name, `${name} must be an http(s) URL, not "${value}".`);
  }
  return url.href.replace(/\/$/, "");
}
