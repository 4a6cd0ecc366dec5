import type { JobError } from "../shared/protocol/error.ts";
import type { AttemptPhase } from "./attempt.ts";
import type { AgentConfig } from "./config.ts";
import type { RunnerSnapshot } from "./runner-pool.ts";

/** The supervisor's public shapes, apart so `supervisor.ts` stays about behaviour. */
export interface Supervisor {
  start(): Promise<void>;
  /** Stops taking work, lets in-flight jobs finish until the drain timeout, releases the rest. */
  drain(): Promise<void>;
  status(): SupervisorStatus;
  /** Observes what happens to deliveries (for tests, metrics); returns an unsubscribe. */
  on(listener: (event: SupervisorEvent) => void): () => void;
}

export type SupervisorConfig = Pick<
  AgentConfig,
  "models" | "maxAttempts" | "heartbeatIntervalMs" | "leaseMs" | "drainTimeoutMs" | "maxInputBytes"
>;

export interface SupervisorStatus {
  state: "idle" | "running" | "draining" | "stopped";
  slots: number;
  busy: number;
  provider: string | null;
  runners: RunnerSnapshot[];
  inFlight: { jobId: string; attempt: number; model: string; phase: JobPhase; since: string }[];
}

/** `succeeded` and `refused` ack the message; the others name what the queue was told. */
export type SettleOutcome = "succeeded" | "refused" | "retried" | "dead-lettered" | "released";

export type SupervisorEvent =
  | {
      type: "settled";
      jobId: string;
      attempt: number;
      outcome: SettleOutcome;
      error: JobError | null;
    }
  | { type: "running"; jobId: string; attempt: number; runner: number; pid: number | null }
  | { type: "heartbeat"; jobId: string; attempt: number };

export type JobPhase = "claiming" | AttemptPhase | "reporting";
