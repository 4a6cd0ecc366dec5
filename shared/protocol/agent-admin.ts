import { z } from "zod";
import { AgentId } from "./agent.ts";
import { AgentDevice } from "./agent-device.ts";

/**
 * Admin API: how an operator sees an agent. `state` is derived: `pending` (created, never
 * connected), `idle`, `busy`, `overloaded` (every slot busy while its models' jobs wait,
 * or VRAM nearly full), `draining`, `gone` (no heartbeat for three intervals), `revoked`.
 */
export const AgentState = z.enum([
  "pending",
  "idle",
  "busy",
  "overloaded",
  "draining",
  "gone",
  "revoked",
]);
export type AgentState = z.infer<typeof AgentState>;

export const AgentView = z.object({
  object: z.literal("agent"),
  id: AgentId,
  name: z.string(),
  /** `admin` (created through the admin API or CLI) or `enrollment`. */
  source: z.enum(["admin", "enrollment"]),
  state: AgentState,
  /** Why the state is what it is, in words. */
  state_reason: z.string(),
  models: z.array(z.string()),
  provider: z.string().nullable(),
  slots: z.number().int().nullable(),
  slots_busy: z.number().int().nullable(),
  /** Jobs the gateway has as running on this agent. */
  jobs_running: z.number().int(),
  run_time_ms_avg: z.number().nullable(),
  vram_used_mb: z.number().int().nullable(),
  vram_total_mb: z.number().int().nullable(),
  /** Its GPUs as its last heartbeat described them; empty for a CPU agent or an old one. */
  devices: z.array(AgentDevice),
  /** The models loaded on its runners, as its last heartbeat said; empty until it says. */
  loaded_models: z.array(z.string()),
  heartbeat_interval_seconds: z.number().nullable(),
  last_heartbeat_at: z.iso.datetime().nullable(),
  registered_at: z.iso.datetime().nullable(),
  created_at: z.iso.datetime(),
  revoked_at: z.iso.datetime().nullable(),
});
export type AgentView = z.infer<typeof AgentView>;

export const AgentList = z.object({
  object: z.literal("list"),
  data: z.array(AgentView),
  next_cursor: z.string().nullable(),
});
export type AgentList = z.infer<typeof AgentList>;

export const AgentCreateRequest = z.object({ name: AgentId.optional() });
export type AgentCreateRequest = z.infer<typeof AgentCreateRequest>;

/** The answer to `POST /v1/admin/agents`: the secret, this once. */
export const AgentCreated = AgentView.extend({ agent_id: AgentId, secret: z.string() });
export type AgentCreated = z.infer<typeof AgentCreated>;
