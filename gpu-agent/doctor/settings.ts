import { givenSettings, infoOf } from "../../shared/settings/index.ts";
import { AGENT_SETTINGS, type AgentConfigFlags } from "../config.ts";
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
  /** The agent's own id and secret are set (rather than the enrollment token). */
  ownSecret: boolean;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Unset as `run` sees it: neither flag nor variable (an empty variable counts as unset). */
export function unsetSettings(env: Env, flags: AgentConfigFlags): UnsetSettings {
  const given = givenSettings(AGENT_SETTINGS, { env, flags });
  return {
    gateway: !given.has("gatewayUrl"),
    queue: !given.has("queueUrl"),
    credentials: !given.has("agentToken") && !given.has("agentSecret"),
    ownSecret: given.has("agentSecret"),
  };
}

/**
 * Stand-ins for the unset settings, so the rest parses and is checked as `run` would; the
 * stand-ins are never contacted (their rows say "not configured" instead).
 */
export function withStandIns(env: Env, unset: UnsetSettings): Env {
  const name = (schema: (typeof AGENT_SETTINGS)[keyof typeof AGENT_SETTINGS]) => infoOf(schema).env;
  return {
    ...env,
    ...(unset.gateway ? { [name(AGENT_SETTINGS.gatewayUrl)]: "http://gateway.invalid" } : {}),
    ...(unset.queue ? { [name(AGENT_SETTINGS.queueUrl)]: "not-configured" } : {}),
    ...(unset.credentials ? { [name(AGENT_SETTINGS.agentToken)]: "unused" } : {}),
  };
}

/** What to set for each, in the words `gantry-agent --help` uses. */
export const SETTING_HINTS = {
  gateway:
    "set GANTRY_GATEWAY_URL (or --gateway) to the gateway's base URL, such as https://gantry.example.com",
  queue:
    "set GANTRY_QUEUE_URL (or --queue) only when the gateway's queue is a broker: amqp://…, sqs://<region>/<prefix>, redis://… or nats://…; with the sql queue none is needed (the jobs come from the gateway)",
  credentials:
    "set GANTRY_AGENT_TOKEN (the fleet's enrollment token), or GANTRY_AGENT_ID + GANTRY_AGENT_SECRET from `gantry agents create`",
} as const;

export function notConfigured(name: string, hint: string): CheckResult {
  return { name, status: "unset", detail: "not configured", hint };
}

/** The credentials row: set or not; never checked against the gateway (that would enroll). */
export function credentialsCheck(unset: UnsetSettings): CheckResult {
  if (unset.credentials) return notConfigured("agent credentials", SETTING_HINTS.credentials);
  return {
    name: "agent credentials",
    status: "pass",
    detail: unset.ownSecret
      ? "GANTRY_AGENT_ID + GANTRY_AGENT_SECRET set (checked on the first signed request)"
      : "GANTRY_AGENT_TOKEN set (checked when the agent enrolls)",
  };
}
