import { z } from "zod";
import { AgentDevice, type HeartbeatRequest } from "../../shared/protocol/index.ts";
import type { AgentRow, AgentStatusReport } from "../store/agents.ts";

/** What an agent said about itself, read from its row or its requests. */

/** The models an agent registered; empty until it registers. */
export function registeredModels(row: AgentRow): string[] {
  if (!row.models) return [];
  const parsed: unknown = JSON.parse(row.models);
  return Array.isArray(parsed) ? parsed.filter((m): m is string => typeof m === "string") : [];
}

/** The status fields of a job heartbeat, for the agent's row. */
export function statusOfJobHeartbeat(request: HeartbeatRequest): AgentStatusReport {
  const { slots_busy, run_time_ms_avg, vram_used_mb, provider, devices, loaded_models } = request;
  return { slots_busy, run_time_ms_avg, vram_used_mb, provider, devices, loaded_models };
}

const StoredDevices = z.array(AgentDevice).catch([]);
const StoredModels = z.array(z.string()).catch([]);

/** The GPUs an agent last described; empty when it never did (a CPU agent, an old one). */
export function reportedDevices(row: AgentRow): AgentDevice[] {
  return row.devices ? StoredDevices.parse(JSON.parse(row.devices)) : [];
}

/** The models an agent last said were loaded; empty when it never said. */
export function loadedModels(row: AgentRow): string[] {
  return row.loaded_models ? StoredModels.parse(JSON.parse(row.loaded_models)) : [];
}
