import type { RunResult, RunUsage } from "../inference/types.ts";
import { TIMEOUT_CODE } from "../runner/run-timeout.ts";

/**
 * A report's usage fields (`gpu_ms`, `provider`, `device`, `load_ms`), from what the runner
 * stamped and the wait for the model's load the pool measured.
 */
export interface ReportUsage {
  gpu_ms?: number;
  provider?: "cuda" | "cpu";
  device?: string;
  load_ms?: number;
}

export function usageFields(usage: RunUsage | undefined): ReportUsage {
  if (!usage) return {};
  return {
    // Whole milliseconds, as the gateway keeps them.
    ...(usage.gpuMs === undefined ? {} : { gpu_ms: Math.round(usage.gpuMs) }),
    ...(usage.provider ? { provider: usage.provider } : {}),
    ...(usage.device ? { device: usage.device.slice(0, 200) } : {}),
    ...(usage.loadMs ? { load_ms: Math.round(usage.loadMs) } : {}),
  };
}

/** The same as span attributes (the inference span's device and provider). */
export function usageAttributes(usage: ReportUsage): Record<string, string | number> {
  return {
    ...(usage.provider ? { "gantry.provider": usage.provider } : {}),
    ...(usage.device ? { "gantry.device": usage.device } : {}),
    ...(usage.gpu_ms === undefined ? {} : { "gantry.gpu_ms": usage.gpu_ms }),
    ...(usage.load_ms === undefined ? {} : { "gantry.load_ms": usage.load_ms }),
  };
}

/** The wait for the model's load this run had on its runner (0: warm), with its usage. */
export function withLoadWait(
  result: RunResult,
  started: { loadMs?: number | undefined } | null,
): RunResult {
  const loadMs = started?.loadMs;
  if (!loadMs || loadMs <= 0) return result;
  return { ...result, usage: { ...result.usage, loadMs } };
}

/**
 * A run the child never answered because it was the one on the device when the child died
 * or ran over its timeout: the device time the fleet lost, from its start on the runner to
 * now, shared by its batch. Runs queued behind it never reached the device: none.
 */
export function lostRunUsage(
  result: RunResult,
  started: { at: number; batch: number } | null,
  now: number,
): RunResult {
  if (result.ok || result.usage?.gpuMs !== undefined || !started) return result;
  if (result.error.code !== "runner_crashed" && result.error.code !== TIMEOUT_CODE) return result;
  const gpuMs = Math.max(0, (now - started.at) / Math.max(1, started.batch));
  return { ...result, usage: { ...result.usage, gpuMs } };
}
