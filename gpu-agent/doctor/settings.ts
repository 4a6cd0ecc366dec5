import type { AgentConfigFlags } from "../config.ts";
import type { CheckResult } from "./report.ts";

/**
 * The settings a fresh box lacks, so that the doctor can still check what needs none (the
 * driver, CUDA, the CPU provider, the models) and say what to set for the rest, instead of
 * refusing to run the way `run` does.
 */
export interface UnsetSettings {
  gateway: boolean;
  queue: boolean;
  credentials: boolean;
}

type Env = Record<string, string | undefined>;

/** An empty variable counts as unset, as it does for `run` (`GANTRY_SLOTS=` in a unit file). */
const given = (flag: string | undefined, value: string | undefined) =>
  flag !== undefined || (value !== undefined && value !== "");

export function unsetSettings(env: Env, flags: AgentConfigFlags): UnsetSettings {
  return {
    gateway: !given(flags.gatewayUrl, env.GANTRY_GATEWAY_URL),
    queue: !given(flags.queueUrl, env.GANTRY_QUEUE_URL),
    credentials:
      !given(undefined, env.GANTRY_AGENT_TOKEN) && !given(undefined, env.GANTRY_AGENT_SECRET),
  };
}

/**
 * Stand-ins for the unset settings, so the rest parses and is checked as `run` would; the
 * stand-ins are never contacted (their rows say "not configured" instead).
 */
export function withStandIns(env: Env, unset: UnsetSettings): Env {
  return {
    ...env,
    ...(unset.gateway ? { GANTRY_GATEWAY_URL: "http://gateway.invalid" } : {}),
    ...(unset.queue ? { GANTRY_QUEUE_URL: "not-configured" } : {}),
    ...(unset.credentials ? { GANTRY_AGENT_TOKEN: "unused" } : {}),
  };
}

/** What to set for each, in the words `gantry-agent --help` uses. */
export const SETTING_HINTS = {
  gateway:
    "set GANTRY_GATEWAY_URL (or --gateway) to the gateway's base URL, such as https://gantry.example.com",
  queue:
    "set GANTRY_QUEUE_URL (or --queue): amqp://…, sqs://<region>/<prefix>, redis://…, nats://…, postgres://… or sqlite:<path>",
  credentials:
    "set GANTRY_AGENT_TOKEN (the fleet's enrollment token), or GANTRY_AGENT_ID + GANTRY_AGENT_SECRET from `gantry agents create`",
} as const;

export function notConfigured(name: string, hint: string): CheckResult {
  return { name, status: "unset", detail: "not configured", hint };
}

/** The credentials row: set or not; never checked against the gateway (that would enroll). */
export function credentialsCheck(env: Env, unset: UnsetSettings): CheckResult {
  if (unset.credentials) return notConfigured("agent credentials", SETTING_HINTS.credentials);
  return {
    name: "agent credentials",
    status: "pass",
    detail: env.GANTRY_AGENT_SECRET
      ? "GANTRY_AGENT_ID + GANTRY_AGENT_SECRET set (checked on the first signed request)"
      : "GANTRY_AGENT_TOKEN set (checked when the agent enrolls)",
  };
}
