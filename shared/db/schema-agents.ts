import type { Generated } from "kysely";

/**
 * A GPU agent: its credentials, what it registered and what its heartbeats last said.
 * `secret` is kept as issued, because verifying an HMAC needs the key itself: this table
 * is as sensitive as the secrets, and the secret never leaves it except in the answer that
 * creates it.
 */
export interface AgentTable {
  /** `agt_…` */
  id: string;
  /** A label: the host-pid an enrolled agent sent, or the operator's name for it. */
  name: string;
  secret: string;
  /** admin | enrollment */
  source: string;
  created_at: number;
  revoked_at: number | null;
  /** JSON array of model ids; null until the agent registers. */
  models: string | null;
  /** cuda | cpu */
  provider: string | null;
  slots: number | null;
  /** Jobs it takes from the queue at once, as it registered (migration 0025). */
  prefetch: Generated<number | null>;
  vram_total_mb: number | null;
  heartbeat_interval_ms: number | null;
  registered_at: number | null;
  last_heartbeat_at: number | null;
  slots_busy: number | null;
  run_time_ms_avg: number | null;
  vram_used_mb: number | null;
  /** running | draining, as the agent last said. */
  reported_state: string | null;
  /** JSON array of its GPUs as its last heartbeat described them (AgentDevice); null: none said. */
  devices: string | null;
  /** JSON array of the models loaded on its runners, as its last heartbeat said. */
  loaded_models: string | null;
}

/** Nonces of signed agent requests, kept until their timestamp could no longer pass. */
export interface AgentNonceTable {
  agent_id: string;
  nonce: string;
  expires_at: number;
}
