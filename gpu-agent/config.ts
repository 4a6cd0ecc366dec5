import { hostname } from "node:os";
import { z } from "zod";
import { UserError } from "../shared/errors.ts";
import { AgentId } from "../shared/protocol/agent.ts";
import { ModelId } from "../shared/protocol/job.ts";
import { queueKind } from "../shared/queue/open/index.ts";
import { readSettings, type SettingProblem, setting } from "../shared/settings/index.ts";
import {
  allowList,
  flag,
  httpUrl,
  list,
  logFormat,
  logLevel,
  port,
  secondsAsMs,
  secret,
  text,
  wholeNumber,
} from "../shared/settings/values.ts";

/** `host-pid`, trimmed to what an agent id allows, so two agents on one host differ. */
export function defaultAgentId(host = hostname(), pid = process.pid): string {
  const suffix = `-${pid}`;
  const cleanHost = host.replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 64 - suffix.length);
  return `${cleanHost || "agent"}${suffix}`;
}

/**
 * Every setting of `gantry-agent run` (and `doctor`): its variable, flag, default and what it
 * is for. Durations are milliseconds in the config. docs/settings.md is generated from it.
 */
export const AGENT_SETTINGS = {
  gatewayUrl: setting(
    "GANTRY_GATEWAY_URL",
    httpUrl(),
    "The gateway's base URL, such as http://127.0.0.1:8787.",
    { flag: "--gateway" },
  ),
  agentToken: setting(
    "GANTRY_AGENT_TOKEN",
    secret().optional(),
    "The fleet's enrollment token: without GANTRY_AGENT_SECRET the agent enrolls with it at start and gets an id and secret of its own (kept in memory: a restart enrolls anew).",
    { secret: true },
  ),
  agentSecret: setting(
    "GANTRY_AGENT_SECRET",
    secret(16).optional(),
    "This agent's own secret, from `gantry agents create`, with GANTRY_AGENT_ID (the id it was issued for) instead of the enrollment token.",
    { secret: true },
  ),
  agentId: setting(
    "GANTRY_AGENT_ID",
    AgentId.prefault(() => defaultAgentId()),
    "With GANTRY_AGENT_SECRET, the id it was issued for; otherwise the name to enroll under.",
    { flag: "--agent-id", shownDefault: "`host-pid`" },
  ),
  queueUrl: setting(
    "GANTRY_QUEUE_URL",
    // Checked here, before the agent enrolls or starts anything, as the gateway checks its own.
    text()
      .refine(knownQueueScheme, { error: (issue) => queueSchemeProblem(issue.input) })
      .optional(),
    "Where jobs wait, for a gateway whose queue is a broker: its queue URL (amqp://, sqs://, redis://, nats://). Unset: the agent takes its jobs from the gateway, which serves its `sql` queue (SQLite, Postgres, D1) to agents, so the agent holds no database URL. A database URL (postgres://, sqlite:<path>) still reads the `sql` queue directly.",
    { flag: "--queue", shownDefault: "unset: jobs come from the gateway" },
  ),
  agentSession: setting(
    "GANTRY_AGENT_SESSION",
    z
      .enum(["auto", "websocket", "http"], { error: "must be auto, websocket or http" })
      .prefault("auto"),
    "How the agent talks to the gateway: `websocket`: one long-lived session, signed once, carrying every claim, heartbeat, report and queue call; `http`: a signed request per call; `auto`: the session where the gateway offers one (Node), else HTTP (Workers).",
  ),
  models: setting(
    "GANTRY_MODELS",
    list(ModelId).prefault("ocr"),
    "Models to serve, comma-separated.",
    { flag: "--models" },
  ),
  slots: setting(
    "GANTRY_SLOTS",
    wholeNumber(1, 64).prefault("1"),
    "Runner processes, so jobs run at once (and the queue prefetch).",
    { flag: "--slots" },
  ),
  threads: setting(
    "GANTRY_THREADS",
    wholeNumber(0, 256).prefault("0"),
    "onnxruntime intra-op threads per runner; 0 lets onnxruntime choose.",
    { flag: "--threads" },
  ),
  gpus: setting(
    "GANTRY_GPUS",
    list(wholeNumber(0, 1023)).optional(),
    "The GPUs to run on, by nvidia-smi index (such as 0,2); each must be visible under CUDA_VISIBLE_DEVICES.",
    { shownDefault: "every GPU nvidia-smi lists and CUDA_VISIBLE_DEVICES shows" },
  ),
  slotsPerGpu: setting(
    "GANTRY_SLOTS_PER_GPU",
    wholeNumber(1, 64).optional(),
    "Runner processes on each GPU, each with its sessions on that GPU's device id; on a host without GPUs GANTRY_SLOTS counts the runners.",
    {
      shownDefault: "GANTRY_SLOTS spread over the GPUs (6 over 4: 2, 2, 1, 1), at least one each",
    },
  ),
  modelMemoryMb: setting(
    "GANTRY_MODEL_MEMORY_MB",
    wholeNumber(1, 64 * 1024 * 1024).optional(),
    "Memory the models of one device may take, in MiB (GPU memory on a GPU, host memory on the CPU), shared equally by that device's runners; idle models are unloaded, least recently used first, to load another.",
    { shownDefault: "free memory at start less 10% (at least 512 MiB)" },
  ),
  preload: setting(
    "GANTRY_PRELOAD",
    list(ModelId).optional(),
    "Models of GANTRY_MODELS each runner loads at start and never unloads; the others load when a job needs them. Unset: each runner loads GANTRY_MODELS in order at start while they fit.",
  ),
  maxAttempts: setting(
    "GANTRY_MAX_ATTEMPTS",
    wholeNumber(1, 100).prefault("5"),
    "Deliveries before a job fails for good; give the gateway the same value.",
  ),
  heartbeatIntervalMs: setting(
    "GANTRY_HEARTBEAT_INTERVAL_SECONDS",
    secondsAsMs(0.05, 3600).prefault("10"),
    "Heartbeat and lease extension period; at most half of GANTRY_LEASE_SECONDS.",
  ),
  leaseMs: setting(
    "GANTRY_LEASE_SECONDS",
    secondsAsMs(0.1, 12 * 3600).prefault("60"),
    "How long a delivery is held per extension; give the gateway the same value.",
  ),
  drainTimeoutMs: setting(
    "GANTRY_DRAIN_TIMEOUT_SECONDS",
    secondsAsMs(0, 24 * 3600).prefault("60"),
    "Time in-flight jobs get to finish on SIGTERM; the rest are released to other agents.",
  ),
  executionProviders: setting(
    "GANTRY_EXECUTION_PROVIDERS",
    list(z.enum(["cuda", "cpu"], { error: "must be cuda or cpu" })).prefault("cuda,cpu"),
    "onnxruntime execution providers to try, in order.",
  ),
  tensorrt: setting(
    "GANTRY_TENSORRT",
    flag().prefault("false"),
    "Run models on a GPU through onnxruntime's TensorRT provider (what it cannot place runs on CUDA); needs TensorRT's libraries on the host, else the runner says why and keeps to CUDA. A model's `tensorrt` in models.yaml overrides it.",
  ),
  maxInputBytes: setting(
    "GANTRY_MAX_INPUT_BYTES",
    wholeNumber(1, 2 ** 32).prefault(String(64 * 1024 * 1024)),
    "Largest input file accepted: a larger one fails its job instead of filling memory.",
  ),
  inputUrlAllow: setting(
    "GANTRY_INPUT_URL_ALLOW",
    allowList().prefault(""),
    "Private hosts and CIDR ranges tenants' input URLs may reach (none: public https addresses only); give the gateway the same value. See [Input URLs](api.md#input-urls).",
  ),
  modelsFile: setting(
    "GANTRY_MODELS_FILE",
    text().optional(),
    "A models.yaml registry: which ONNX files (checked by sha256) back which model ids.",
  ),
  modelCacheDir: setting(
    "GANTRY_MODEL_CACHE_DIR",
    text().prefault("./model-cache"),
    "Where registry files are downloaded to, by sha256.",
  ),
  lookahead: setting(
    "GANTRY_LOOKAHEAD",
    wholeNumber(0, 1024).optional(),
    "Jobs claimed and downloaded ahead of the runners, in all (default: one per slot), so a runner never waits on I/O; raise it for short jobs, whose throughput is capped by the jobs an agent holds. The agent registers it, with its runners' batches, as its `prefetch`: the gateway keeps that many of its models' jobs released for it (`GANTRY_RELEASE_WINDOW` grows to it). A full agent takes more once a quarter of its look-ahead is free, in one batch, not one job per job that ends.",
  ),
  batchWindowMs: setting(
    "GANTRY_BATCH_WINDOW_MS",
    wholeNumber(0, 1000).prefault("10"),
    "How long a batchable model waits for more jobs before running a batch (adapts to how fast jobs arrive).",
  ),
  metricsPort: setting(
    "GANTRY_METRICS_PORT",
    port(1).optional(),
    "Serve Prometheus /metrics on this port, on the address `GANTRY_METRICS_HOST` names; off when unset.",
  ),
  metricsHost: setting(
    "GANTRY_METRICS_HOST",
    text().prefault("0.0.0.0"),
    "Address the metrics listener binds: every interface by default (unlike the gateway's loopback), since a Prometheus in another pod or host scrapes an agent; keep the port off a public address, or set `127.0.0.1` where only this host scrapes it.",
  ),
  overflowAfterMs: setting(
    "GANTRY_OVERFLOW_AFTER_SECONDS",
    secondsAsMs(0.1, 3600).optional(),
    "Run as overflow capacity: take a model's jobs only once they have waited this long for another agent; off when unset. See [Overflow agents](agents.md#overflow-agents).",
  ),
  logLevel: setting("GANTRY_LOG_LEVEL", logLevel().prefault("info"), "pino level of the logs."),
  logFormat: setting(
    "GANTRY_LOG_FORMAT",
    logFormat().optional(),
    "`pretty`: readable lines; `json`: pino's JSON lines, for log shippers.",
    { shownDefault: "`pretty` in a terminal, else `json`" },
  ),
};

/** The agent's settings, parsed once at start-up. Durations are milliseconds. */
export type AgentConfig = ReturnType<typeof parseAgentConfig>;

/** Settings a CLI flag can override; the value is the flag's raw text. */
export type AgentConfigFlags = Partial<Record<keyof typeof AGENT_SETTINGS, string>>;

/**
 * Reads the agent's settings from `GANTRY_*` environment variables, with CLI flags taking
 * precedence. Every bad value is reported at once, named as the operator wrote it, in a
 * `UserError` (the CLI prints it plainly and exits 2).
 */
export function parseAgentConfig(
  env: Readonly<Record<string, string | undefined>>,
  flags: AgentConfigFlags = {},
) {
  const read = readSettings(AGENT_SETTINGS, { env, flags });
  const problems = [...(read.ok ? [] : read.problems), ...credentialProblems(read.given)].map(
    (problem) => problem.line,
  );
  if (read.ok && problems.length === 0) {
    problems.push(...timingProblems(read.settings), ...preloadProblems(read.settings));
  }
  if (!read.ok || problems.length > 0) {
    throw new UserError(`Invalid agent settings:\n  ${problems.join("\n  ")}`);
  }
  return read.settings;
}

/**
 * An agent authenticates with its own id and secret, or enrolls with the fleet's token. A
 * secret without the id it was issued for cannot work, and the default id (host-pid) is
 * never one the gateway issued.
 */
function credentialProblems(given: ReadonlySet<string>): SettingProblem[] {
  if (given.has("agentSecret")) {
    if (given.has("agentId")) return [];
    const line =
      "GANTRY_AGENT_SECRET needs GANTRY_AGENT_ID (or --agent-id): the id it was issued for";
    return [{ setting: "GANTRY_AGENT_ID", line }];
  }
  if (given.has("agentToken")) return [];
  const line =
    "GANTRY_AGENT_TOKEN is required (the fleet's enrollment token), unless GANTRY_AGENT_ID and GANTRY_AGENT_SECRET give this agent its own credentials";
  return [{ setting: "GANTRY_AGENT_TOKEN", line }];
}

/** A preloaded model is pinned in every runner: one the agent does not serve never runs a job. */
function preloadProblems(config: { models: string[]; preload?: string[] | undefined }): string[] {
  const unserved = (config.preload ?? []).filter((model) => !config.models.includes(model));
  if (unserved.length === 0) return [];
  return [
    `GANTRY_PRELOAD names ${unserved.join(", ")}, which GANTRY_MODELS (${config.models.join(",")}) does not serve`,
  ];
}

function timingProblems(config: {
  heartbeatIntervalMs: number;
  leaseMs: number;
  overflowAfterMs?: number | undefined;
}): string[] {
  const problems: string[] = [];
  // One lost heartbeat must not lose the lease.
  if (config.heartbeatIntervalMs * 2 > config.leaseMs) {
    problems.push(
      `GANTRY_HEARTBEAT_INTERVAL_SECONDS (${config.heartbeatIntervalMs / 1000}) must be at most half of GANTRY_LEASE_SECONDS (${config.leaseMs / 1000})`,
    );
  }
  // A held job must start before its lease ends.
  if (config.overflowAfterMs !== undefined && config.overflowAfterMs >= config.leaseMs) {
    problems.push(
      `GANTRY_OVERFLOW_AFTER_SECONDS (${config.overflowAfterMs / 1000}) must be less than GANTRY_LEASE_SECONDS (${config.leaseMs / 1000})`,
    );
  }
  return problems;
}

function knownQueueScheme(url: string): boolean {
  return queueSchemeProblem(url) === null;
}

/** queueKind's own words for a scheme no adapter reads (they list the schemes); else null. */
function queueSchemeProblem(url: unknown): string | null {
  try {
    queueKind(String(url));
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
