import { hostname } from "node:os";
import { z } from "zod";
import { UserError } from "../shared/errors.ts";
import { parseAllowList } from "../shared/net/allow-list.ts";
import { AgentId } from "../shared/protocol/agent.ts";
import { ModelId } from "../shared/protocol/job.ts";
import type { ExecutionProvider } from "./inference/types.ts";

/** The agent's settings, parsed once at start-up. Durations are milliseconds. */
export interface AgentConfig {
  gatewayUrl: string;
  /**
   * The fleet's enrollment token: without `agentSecret`, the agent enrolls with it at start
   * and gets an id and secret of its own (kept in memory: a restart enrolls anew).
   */
  agentToken?: string;
  /** This agent's own secret, issued for `agentId` (`gantry agents create`): no enrollment. */
  agentSecret?: string;
  /** With `agentSecret`, the id it was issued for; otherwise the name to enroll under. */
  agentId: string;
  /** `sqlite:<path>` or a plain file path for now; `amqp://` and `sqs://` later. */
  queueUrl: string;
  models: string[];
  /** Runner child processes, and so the queue prefetch. */
  slots: number;
  /** onnxruntime intra-op threads per runner; 0 lets onnxruntime choose. */
  threads: number;
  /** Deliveries before a job is dead-lettered; the queue and `will_retry` agree on it. */
  maxAttempts: number;
  heartbeatIntervalMs: number;
  leaseMs: number;
  drainTimeoutMs: number;
  executionProviders: ExecutionProvider[];
  /** Inputs larger than this fail the job permanently instead of filling memory. */
  maxInputBytes: number;
  /**
   * GANTRY_INPUT_URL_ALLOW: hosts and CIDR ranges a tenant's input URL may reach although
   * they are private (shared/net/allow-list.ts). Empty (the default): public https only.
   */
  inputUrlAllow?: string[];
  /** A models.yaml registry: which ONNX files (checked by sha256) back which model ids. */
  modelsFile?: string;
  /** Where registry files are downloaded to, by sha256. */
  modelCacheDir: string;
  /**
   * Jobs claimed and downloaded ahead of the runners, in all (default: one per slot), so a
   * runner never waits on I/O. Short jobs want many: an agent's throughput is at most the
   * jobs it holds over the time each spends in it, round trips included.
   */
  lookahead?: number;
  /** How long a batchable model waits for more jobs before running a batch. */
  batchWindowMs: number;
  /**
   * How long a claim or report waits for others to share its request to the gateway. 0 by
   * default: calls that pile up behind one in flight travel together anyway, and a wait
   * only delays the first (measured on no-op jobs at 200/s: 2 ms doubled the median
   * latency, 13 ms against 7, and saved no CPU or throughput at saturation).
   */
  callLingerMs: number;
  /** Serve Prometheus `/metrics` on this port; off when unset. */
  metricsPort?: number;
  /**
   * Overflow capacity (a CPU box beside the GPUs): take a model's jobs only once they have
   * waited this long for another agent, so it absorbs a burst and stays idle otherwise.
   */
  overflowAfterMs?: number;
}

/** Settings a CLI flag can override; the value is the flag's raw text. */
export type AgentConfigFlags = Partial<
  Record<"gatewayUrl" | "queueUrl" | "models" | "slots" | "threads" | "agentId", string>
>;

type Env = Record<string, string | undefined>;

const number = (pattern: RegExp, hint: string) =>
  z.string().trim().regex(pattern, hint).transform(Number);
const wholeNumber = (min: number, max: number) =>
  number(/^\d+$/, "must be a whole number").pipe(
    z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`),
  );
/** Seconds in the environment (fractions allowed, for tests), milliseconds in the config. */
const seconds = (min: number, max: number) =>
  number(/^\d+(\.\d+)?$/, "must be a number of seconds, such as 10 or 0.5")
    .pipe(z.number().min(min, `must be at least ${min} s`).max(max, `must be at most ${max} s`))
    .transform((s) => Math.round(s * 1000));
const splitList = (text: unknown) =>
  typeof text === "string"
    ? [
        ...new Set(
          text
            .split(",")
            .map((part) => part.trim())
            .filter(Boolean),
        ),
      ]
    : text;
const list = <T extends z.ZodType>(item: T) =>
  z.preprocess(splitList, z.array(item).min(1, "must name at least one, comma-separated"));

/** Hosts and CIDR ranges, comma-separated; an empty text is the empty list. */
const allowListSchema = z.string().transform((text, context) => {
  try {
    return [...parseAllowList(text).entries];
  } catch (error) {
    context.addIssue({ code: "custom", message: (error as Error).message });
    return z.NEVER;
  }
});

/** Every setting: where it comes from, its default, and how its text is parsed. */
const SETTINGS = {
  gatewayUrl: {
    env: "GANTRY_GATEWAY_URL",
    flag: "--gateway",
    schema: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
  },
  agentToken: {
    env: "GANTRY_AGENT_TOKEN",
    optional: true,
    secret: true,
    schema: z.string().min(1),
  },
  agentSecret: {
    env: "GANTRY_AGENT_SECRET",
    optional: true,
    secret: true,
    schema: z.string().min(16, "must be at least 16 characters"),
  },
  agentId: { env: "GANTRY_AGENT_ID", flag: "--agent-id", schema: AgentId },
  queueUrl: { env: "GANTRY_QUEUE_URL", flag: "--queue", schema: z.string().trim().min(1) },
  models: { env: "GANTRY_MODELS", flag: "--models", default: "ocr", schema: list(ModelId) },
  slots: { env: "GANTRY_SLOTS", flag: "--slots", default: "1", schema: wholeNumber(1, 64) },
  threads: { env: "GANTRY_THREADS", flag: "--threads", default: "0", schema: wholeNumber(0, 256) },
  maxAttempts: { env: "GANTRY_MAX_ATTEMPTS", default: "5", schema: wholeNumber(1, 100) },
  heartbeatIntervalMs: {
    env: "GANTRY_HEARTBEAT_INTERVAL_SECONDS",
    default: "10",
    schema: seconds(0.05, 3600),
  },
  leaseMs: { env: "GANTRY_LEASE_SECONDS", default: "60", schema: seconds(0.1, 12 * 3600) },
  drainTimeoutMs: {
    env: "GANTRY_DRAIN_TIMEOUT_SECONDS",
    default: "60",
    schema: seconds(0, 24 * 3600),
  },
  executionProviders: {
    env: "GANTRY_EXECUTION_PROVIDERS",
    default: "cuda,cpu",
    schema: list(z.enum(["cuda", "cpu"], { error: "must be cuda or cpu" })),
  },
  maxInputBytes: {
    env: "GANTRY_MAX_INPUT_BYTES",
    default: String(64 * 1024 * 1024),
    schema: wholeNumber(1, 2 ** 32),
  },
  inputUrlAllow: { env: "GANTRY_INPUT_URL_ALLOW", default: "", schema: allowListSchema },
  modelsFile: { env: "GANTRY_MODELS_FILE", optional: true, schema: z.string().trim().min(1) },
  modelCacheDir: {
    env: "GANTRY_MODEL_CACHE_DIR",
    default: "./model-cache",
    schema: z.string().trim().min(1),
  },
  lookahead: { env: "GANTRY_LOOKAHEAD", optional: true, schema: wholeNumber(0, 1024) },
  batchWindowMs: { env: "GANTRY_BATCH_WINDOW_MS", default: "10", schema: wholeNumber(0, 1000) },
  callLingerMs: { env: "GANTRY_CALL_LINGER_MS", default: "0", schema: wholeNumber(0, 1000) },
  metricsPort: { env: "GANTRY_METRICS_PORT", optional: true, schema: wholeNumber(1, 65535) },
  overflowAfterMs: {
    env: "GANTRY_OVERFLOW_AFTER_SECONDS",
    optional: true,
    schema: seconds(0.1, 3600),
  },
} as const;

type SettingKey = keyof typeof SETTINGS;

/** `host-pid`, trimmed to what an agent id allows, so two agents on one host differ. */
export function defaultAgentId(host = hostname(), pid = process.pid): string {
  const suffix = `-${pid}`;
  const cleanHost = host.replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 64 - suffix.length);
  return `${cleanHost || "agent"}${suffix}`;
}

/**
 * Reads the agent's settings from `GANTRY_*` environment variables, with CLI flags taking
 * precedence. Every bad value is reported at once, named as the operator wrote it, in a
 * `UserError` (the CLI prints it plainly and exits 2).
 */
export function parseAgentConfig(env: Env, flags: AgentConfigFlags = {}): AgentConfig {
  const raw: Partial<Record<SettingKey, string>> = {};
  const source: Partial<Record<SettingKey, string>> = {};
  const defaulted = new Set<SettingKey>();
  for (const [key, setting] of Object.entries(SETTINGS) as [SettingKey, Setting][]) {
    const fromFlag = (flags as Partial<Record<SettingKey, string>>)[key];
    const fromEnv = env[setting.env];
    // An empty variable counts as unset: `GANTRY_SLOTS=` in a unit file means "default".
    if (fromFlag !== undefined) {
      raw[key] = fromFlag;
      source[key] = setting.flag ?? setting.env;
    } else if (fromEnv !== undefined && fromEnv !== "") {
      raw[key] = fromEnv;
      source[key] = setting.env;
    } else {
      raw[key] = key === "agentId" ? defaultAgentId() : setting.default;
      source[key] = setting.env;
      defaulted.add(key);
    }
  }

  const problems: string[] = [];
  const parsed: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(SETTINGS) as [SettingKey, Setting][]) {
    const value = raw[key];
    const name = source[key] ?? setting.env;
    if (value === undefined && setting.optional) continue;
    if (value === undefined) {
      problems.push(`${name} is required (${REQUIRED_HINT[key] ?? "no default"})`);
      continue;
    }
    const result = setting.schema.safeParse(value);
    // A secret's value is never echoed, not even a wrong one: error output ends up in logs.
    const got = setting.secret ? `${value.length} characters` : JSON.stringify(value);
    if (result.success) parsed[key] = result.data;
    else problems.push(`${name}: ${describe(result.error)} (got ${got})`);
  }
  problems.push(...credentialProblems(raw, !defaulted.has("agentId")));
  const config = parsed as unknown as AgentConfig;
  if (
    problems.length === 0 &&
    config.heartbeatIntervalMs * 2 > config.leaseMs // one lost heartbeat must not lose the lease
  ) {
    problems.push(
      `GANTRY_HEARTBEAT_INTERVAL_SECONDS (${config.heartbeatIntervalMs / 1000}) must be at most half of GANTRY_LEASE_SECONDS (${config.leaseMs / 1000})`,
    );
  }
  if (
    problems.length === 0 &&
    config.overflowAfterMs !== undefined &&
    config.overflowAfterMs >= config.leaseMs // a held job must start before its lease ends
  ) {
    problems.push(
      `GANTRY_OVERFLOW_AFTER_SECONDS (${config.overflowAfterMs / 1000}) must be less than GANTRY_LEASE_SECONDS (${config.leaseMs / 1000})`,
    );
  }
  if (problems.length > 0) {
    throw new UserError(`Invalid agent settings:\n  ${problems.join("\n  ")}`);
  }
  return config;
}

interface Setting {
  env: string;
  flag?: string;
  default?: string;
  /** May be left unset; `credentialProblems` checks the combinations. */
  optional?: boolean;
  /** Never shown back in an error message. */
  secret?: boolean;
  schema: z.ZodType;
}

/**
 * An agent authenticates with its own id and secret, or enrolls with the fleet's token. A
 * secret without the id it was issued for cannot work, and the default id (host-pid) is
 * never one the gateway issued.
 */
function credentialProblems(raw: Partial<Record<SettingKey, string>>, idGiven: boolean): string[] {
  if (raw.agentSecret !== undefined) {
    return idGiven
      ? []
      : ["GANTRY_AGENT_SECRET needs GANTRY_AGENT_ID (or --agent-id): the id it was issued for"];
  }
  if (raw.agentToken !== undefined) return [];
  return [
    "GANTRY_AGENT_TOKEN is required (the fleet's enrollment token), unless GANTRY_AGENT_ID and GANTRY_AGENT_SECRET give this agent its own credentials",
  ];
}

const REQUIRED_HINT: Partial<Record<SettingKey, string>> = {
  gatewayUrl: "the gateway's base URL, such as http://127.0.0.1:8080",
  queueUrl: "where jobs wait, such as sqlite:./data/gantry.db",
};

function describe(error: z.ZodError): string {
  return error.issues.map((issue) => issue.message).join("; ");
}
