import type { AgentState, AgentView } from "../../shared/protocol/index.ts";
import type { AgentRow } from "../store/agents.ts";
import { loadedModels, registeredModels, reportedDevices } from "./reports.ts";

/** Assumed when an agent did not say how often it heartbeats (the agent's own default). */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 10_000;
/** Missed beats before an agent counts as gone. */
export const GONE_AFTER_BEATS = 3;
/** VRAM use at or above this share of the total counts as overloaded. */
export const VRAM_OVERLOADED_RATIO = 0.95;

/** What the listing knows beside the agent's own row. */
export interface AgentFacts {
  /** Jobs the gateway has as running on this agent. */
  jobsRunning: number;
  /** Jobs ready in the queue, by model; a model missing here is unknown, not zero. */
  waitingByModel: ReadonlyMap<string, number>;
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

const intervalOf = (row: AgentRow) => row.heartbeat_interval_ms ?? DEFAULT_HEARTBEAT_INTERVAL_MS;

/**
 * A registered, unrevoked agent heard from within GONE_AFTER_BEATS of its beats, that has not
 * said it stopped.
 */
export function isLive(row: AgentRow, now: number): boolean {
  if (row.revoked_at !== null || row.registered_at === null) return false;
  if (row.reported_state === "stopped") return false;
  const lastSeen = row.last_heartbeat_at ?? row.registered_at;
  return now - lastSeen <= GONE_AFTER_BEATS * intervalOf(row);
}

/** Which box is idle, busy, overloaded or gone, and why, in one word and one sentence. */
export function agentState(
  row: AgentRow,
  facts: AgentFacts,
  now: number,
): { state: AgentState; reason: string } {
  if (row.revoked_at !== null) {
    return { state: "revoked", reason: `revoked at ${iso(row.revoked_at)}` };
  }
  if (row.registered_at === null) {
    // An enrolled agent was alive when it enrolled; one made by an operator may never come.
    if (row.source === "enrollment" && now - row.created_at > GONE_AFTER_BEATS * intervalOf(row)) {
      return { state: "gone", reason: "enrolled but never registered" };
    }
    return { state: "pending", reason: "has not registered yet" };
  }
  if (row.reported_state === "stopped") {
    // Said so in its last beat: gone at once, not three missed beats later.
    return { state: "gone", reason: `stopped at ${iso(row.last_heartbeat_at)}` };
  }
  if (!isLive(row, now)) {
    const silent = now - (row.last_heartbeat_at ?? row.registered_at);
    return {
      state: "gone",
      reason: `no heartbeat for ${seconds(silent)} (beats every ${seconds(intervalOf(row))})`,
    };
  }
  const slots = row.slots ?? 0;
  // The job store knows at once what heartbeats report a beat later; an agent that claims
  // ahead (pipelining) may hold more jobs than slots.
  const busy = Math.max(row.slots_busy ?? 0, facts.jobsRunning);
  const claimedAhead = facts.jobsRunning > slots ? `, ${facts.jobsRunning} jobs claimed` : "";
  const slotWords = `${Math.min(busy, slots)} of ${slots} slot${slots === 1 ? "" : "s"} busy${claimedAhead}`;
  if (row.reported_state === "draining") {
    return { state: "draining", reason: `stopped taking jobs; ${slotWords}` };
  }
  if (row.vram_total_mb && row.vram_used_mb !== null) {
    const share = row.vram_used_mb / row.vram_total_mb;
    if (share >= VRAM_OVERLOADED_RATIO) {
      return { state: "overloaded", reason: `VRAM ${Math.round(share * 100)}% used; ${slotWords}` };
    }
  }
  if (slots > 0 && busy >= slots) {
    const waiting = registeredModels(row)
      .map((model) => [model, facts.waitingByModel.get(model) ?? 0] as const)
      .filter(([, count]) => count > 0);
    if (waiting.length > 0) {
      const queued = waiting.map(([model, count]) => `${count} ${model}`).join(", ");
      return { state: "overloaded", reason: `${slotWords}; jobs waiting: ${queued}` };
    }
  }
  if (busy > 0) return { state: "busy", reason: slotWords };
  return { state: "idle", reason: slotWords };
}

/** The operator's view of an agent. Never carries the secret. */
export function toAgentView(row: AgentRow, facts: AgentFacts, now: number): AgentView {
  const { state, reason } = agentState(row, facts, now);
  return {
    object: "agent",
    id: row.id,
    name: row.name,
    source: row.source === "admin" ? "admin" : "enrollment",
    state,
    state_reason: reason,
    models: registeredModels(row),
    provider: row.provider,
    slots: row.slots,
    slots_busy: row.slots_busy,
    jobs_running: facts.jobsRunning,
    run_time_ms_avg: row.run_time_ms_avg,
    vram_used_mb: row.vram_used_mb,
    vram_total_mb: row.vram_total_mb,
    devices: reportedDevices(row),
    loaded_models: loadedModels(row),
    heartbeat_interval_seconds:
      row.heartbeat_interval_ms === null ? null : row.heartbeat_interval_ms / 1000,
    last_heartbeat_at: iso(row.last_heartbeat_at),
    registered_at: iso(row.registered_at),
    created_at: new Date(row.created_at).toISOString(),
    revoked_at: iso(row.revoked_at),
  };
}
