import type { Selectable } from "kysely";
import type { AgentTable } from "../../shared/db/schema.ts";
import type { AgentHeartbeatRequest } from "../../shared/protocol/index.ts";

/** An agent as stored; apart from the store (store.ts) so the ports can name it. */
export type AgentRow = Selectable<AgentTable>;
export type AgentSource = "admin" | "enrollment";

/** What an agent's heartbeats say about it; every field optional. */
export type AgentStatusReport = Partial<
  Pick<AgentHeartbeatRequest, "slots_busy" | "run_time_ms_avg" | "vram_used_mb" | "provider">
> & { state?: AgentHeartbeatRequest["state"] };
