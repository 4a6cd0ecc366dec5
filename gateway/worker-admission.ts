import { parseAllowList } from "../shared/net/allow-list.ts";
import type { DurableNamespaceLike } from "./limits/durable-buckets.ts";
import { parseQueueBounds } from "./queue-bound-settings.ts";

/**
 * The Workers gateway's backpressure bounds and destination allow-lists, as wrangler vars
 * (the same names and forms as the Node gateway's settings; README "Settings"). Apart from
 * worker-settings.ts to keep that file about adapters. A bad value throws the error
 * `fail` makes, naming the var.
 */
export interface AdmissionEnv {
  /**
   * The Durable Object namespace of class GantryRateLimiter (wrangler.toml): when bound, a
   * tenant's rate limit and the per-address limit hold across isolates; else per isolate.
   */
  RATE_LIMITS?: DurableNamespaceLike;
  /** Waiting jobs per model before submits get 503 queue_full. Default 10000. */
  GANTRY_MAX_QUEUE_DEPTH?: string | number;
  /** `ocr=500,noop=100000`: the bound of single models. */
  GANTRY_MAX_QUEUE_DEPTH_BY_MODEL?: string;
  /** Internal webhook receivers (hosts, CIDRs) the URL policy lets through, over http too. */
  GANTRY_WEBHOOK_ALLOW?: string;
  /** Private input hosts (hosts, CIDRs) tenants' input URLs may name. */
  GANTRY_INPUT_URL_ALLOW?: string;
}

/** Makes the error thrown for a bad var (worker-settings.ts's ConfigurationError). */
export type SettingError = (setting: keyof AdmissionEnv, message: string) => Error;

export interface AdmissionSettings {
  maxQueueDepth?: number;
  queueBounds: Record<string, number>;
  webhookAllow: string[];
  inputUrlAllow: string[];
}

export function readAdmission(
  env: AdmissionEnv,
  models: readonly string[],
  fail: SettingError,
): AdmissionSettings {
  const depth = String(env.GANTRY_MAX_QUEUE_DEPTH ?? "").trim();
  if (depth !== "" && !(/^\d{1,12}$/.test(depth) && Number(depth) >= 1)) {
    throw fail(
      "GANTRY_MAX_QUEUE_DEPTH",
      `GANTRY_MAX_QUEUE_DEPTH must be a whole number of at least 1, not "${depth}".`,
    );
  }
  return {
    ...(depth === "" ? {} : { maxQueueDepth: Number(depth) }),
    queueBounds: named(fail, "GANTRY_MAX_QUEUE_DEPTH_BY_MODEL", () =>
      parseQueueBounds(env.GANTRY_MAX_QUEUE_DEPTH_BY_MODEL, models),
    ),
    webhookAllow: named(fail, "GANTRY_WEBHOOK_ALLOW", () => [
      ...parseAllowList(env.GANTRY_WEBHOOK_ALLOW).entries,
    ]),
    inputUrlAllow: named(fail, "GANTRY_INPUT_URL_ALLOW", () => [
      ...parseAllowList(env.GANTRY_INPUT_URL_ALLOW).entries,
    ]),
  };
}

function named<T>(fail: SettingError, setting: keyof AdmissionEnv, read: () => T): T {
  try {
    return read();
  } catch (error) {
    throw fail(setting, `${setting}: ${(error as Error).message}.`);
  }
}
