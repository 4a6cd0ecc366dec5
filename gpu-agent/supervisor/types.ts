import type { Logger } from "pino";
import type { JobError } from "../../shared/protocol/error.ts";
import type { JobQueue } from "../../shared/queue/port.ts";
import type { Tracer } from "../../shared/tracing/tracer.ts";
import type { WaitBackoffOptions } from "../backoff.ts";
import type { AgentConfig } from "../config.ts";
import type { GatewayClient } from "../gateway/client.ts";
import type { PoolOptions, RunnerSnapshot } from "../runner/pool.ts";
import type { Runner } from "../runner/types.ts";
import type { InputUrlOptions } from "../transfer/input-url.ts";
import type { AttemptPhase } from "./attempt.ts";

/**
 * The supervisor as the rest of the agent sees it (the metrics, the agent heartbeat, the
 * gateway link, tests): what it does, what it reports, what it is built from.
 */
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
  | "models"
  | "maxAttempts"
  | "heartbeatIntervalMs"
  | "leaseMs"
  | "drainTimeoutMs"
  | "maxInputBytes"
  | "overflowAfterMs"
> &
  // Empty (public https only) when left out.
  Partial<Pick<AgentConfig, "inputUrlAllow">>;

export interface SupervisorStatus {
  state: "idle" | "running" | "draining" | "stopped";
  slots: number;
  busy: number;
  /** Jobs claimed and downloaded, waiting for a runner. */
  waiting: number;
  provider: string | null;
  runners: RunnerSnapshot[];
  /** GPUs taken out after their runners kept failing (nvidia-smi indices). */
  failedGpus?: number[];
  /** How many jobs it takes from the queue at once, once started: see AgentRegisterRequest. */
  prefetch?: number;
  inFlight: { jobId: string; attempt: number; model: string; phase: JobPhase; since: string }[];
}

/**
 * `succeeded` and `refused` ack the message; `lease-lost` tells the queue nothing (another
 * delivery owns the job now); the others name what the queue was told.
 */
export type SettleOutcome =
  | "succeeded"
  | "refused"
  | "retried"
  | "dead-lettered"
  | "released"
  | "lease-lost";

/** A gateway call a job is held for while the gateway is unreachable. */
export type HeldCall = "claim" | "report";

export type SupervisorEvent =
  /** The gateway handed over the job: queue wait ends here. */
  | { type: "claimed"; jobId: string; attempt: number; createdAt: string }
  | {
      type: "settled";
      jobId: string;
      attempt: number;
      outcome: SettleOutcome;
      error: JobError | null;
    }
  | {
      type: "running";
      jobId: string;
      attempt: number;
      runner: number;
      pid: number | null;
      /** Jobs in the batch this one runs in (1: alone). */
      batch: number;
      /** How long it waited, downloaded, for a runner (ms). */
      waitedMs?: number;
      /** How long it then waited for its model to load on that runner (ms; 0: warm). */
      loadMs?: number;
    }
  | { type: "heartbeat"; jobId: string; attempt: number }
  /** The gateway is unreachable: the job is kept (its lease extended) and `call` retried. */
  | { type: "holding"; jobId: string; attempt: number; call: HeldCall; round: number };

export type JobPhase = "claiming" | AttemptPhase | "reporting";

export interface SupervisorOptions {
  queue: JobQueue;
  gateway: GatewayClient;
  runners: Runner[];
  config: SupervisorConfig;
  logger: Logger;
  /** For the gateway's presigned input downloads and artifact uploads. */
  fetch?: typeof fetch;
  /** Test seams for tenants' input URLs (a resolver, a CA); the allow-list is in `config`. */
  inputUrls?: Omit<InputUrlOptions, "allow">;
  /** Delay before redelivering a failed attempt; exponential with full jitter by default. */
  retryDelayMs?: (attempt: number) => number;
  /**
   * Deliveries taken beyond what the runners can run at once, so the next jobs are claimed
   * and downloaded while the current ones run. Default: one per runner.
   */
  lookahead?: number;
  /** Runner crashes on one job before it is dead-lettered as `poison_job`. Default 3. */
  poisonCrashes?: number;
  /** Waits between tries of a held claim or report (see hold.ts). Default 0.5 s up to 15 s. */
  gatewayBackoff?: WaitBackoffOptions;
  /** Memory budgets, pinned models and warm preference of the runner pool. */
  pool?: PoolOptions;
  /** Spans of each job's run (OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT is set). */
  tracer?: Tracer;
}
