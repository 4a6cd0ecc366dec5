import type { Logger } from "pino";
import type { AgentCrypto } from "../../shared/agent-signing.ts";
import type {
  AgentEvent,
  AgentHeartbeatRequest,
  AgentRegisterRequest,
  Claim,
  HeartbeatRequest,
} from "../../shared/protocol/agent.ts";
import type {
  QueueDelivery,
  QueueDepthResponse,
  QueueInfo,
  QueueSettle,
  QueueSettleResult,
  QueueTakeRequest,
} from "../../shared/protocol/agent-queue.ts";
import type { ProgressReport } from "../../shared/protocol/progress.ts";
import type { GatewayError } from "./errors.ts";

/**
 * The agent's side of the gateway's internal API (`/internal/v1/…`). Every request is
 * signed with the agent's own secret (shared/agent-signing.ts), afresh on each try.
 * Transient trouble (network errors, timeouts, 5xx, 429) is retried here with backoff and
 * jitter; what is left is either an answer the supervisor acts on or a `GatewayError`.
 */
export interface GatewayClient {
  /** The id the gateway knows this agent by: the enrolled id once enrolled. */
  readonly agentId: string;
  /** Gets an id and secret with the enrollment token, once; the later calls reuse them. */
  enroll(): Promise<string>;
  /** Tells the gateway what this agent serves; it may claim only jobs of these models. */
  /** Resolves with the models the gateway answered it does not serve. */
  register(registration: AgentRegistration): Promise<{ unserved: string[] }>;
  /** The agent-level heartbeat, sent busy or idle. */
  agentHeartbeat(status: AgentHeartbeatBody): Promise<void>;
  /** Answered without a call when the gateway claimed the job as it handed it out. */
  claim(jobId: string, attempt: number): Promise<ClaimOutcome>;
  /**
   * Whether the gateway claimed this job for this attempt as it handed its delivery out, and
   * no claim has been made of it since: a delivery given back unrun must then be reported
   * released. Forgets the claim.
   */
  claimedAhead?(jobId: string, attempt: number): boolean;
  /** Keeps the attempt alive; `progress`, when given, is the run's latest report. */
  heartbeat(jobId: string, attempt: number, progress?: ProgressReport): Promise<HeartbeatOutcome>;
  /**
   * Idempotent per job and attempt: a 409 (already recorded, stale) counts as recorded.
   * `lingerMs`: how long it may wait for other reports to share its request (default 0).
   */
  report(
    jobId: string,
    event: AgentEventBody,
    options?: { lingerMs?: number },
  ): Promise<ReportOutcome>;
  /** The gateway's own queue, for an agent without a queue URL (gateway/queue.ts). */
  readonly queue?: GatewayQueueCalls;
  /** Ends the agent's session with the gateway, if it holds one. */
  close?(): Promise<void>;
}

/** An AgentEvent without the fields the client fills in (`v`, `agent_id`). */
export type AgentEventBody = AgentEvent extends infer E
  ? E extends AgentEvent
    ? Omit<E, "v" | "agent_id">
    : never
  : never;

export type AgentRegistration = Omit<AgentRegisterRequest, "v">;
export type AgentHeartbeatBody = Omit<AgentHeartbeatRequest, "v">;
/** What every job heartbeat also says about the agent. */
export type AgentStatus = Pick<
  HeartbeatRequest,
  "slots_busy" | "run_time_ms_avg" | "vram_used_mb" | "provider" | "devices" | "loaded_models"
>;

/**
 * `refused`: the job must not run (409 `job_canceled` | `job_finished` | `job_expired` |
 * `stale_attempt`, or a 404 for a job the gateway does not know); the message is acked.
 */
export type ClaimOutcome =
  | { ok: true; claim: Claim }
  | { ok: false; status: number; code: string; detail: string | null };

export type HeartbeatOutcome =
  | { ok: true; status: string }
  | { ok: false; status: number; code: string };

export interface ReportOutcome {
  /** The job's status after the event, when the gateway said. */
  status: string | null;
  /** True when the gateway answered 409: it had recorded this (or a later) attempt. */
  duplicate: boolean;
  /** For a report with an `ack_receipt`: whether the gateway acked that delivery with it. */
  acked?: boolean;
}

/**
 * The agent API of a gateway in this process (`gantry start`): a call's path and JSON text,
 * answered with the status and the JSON body the gateway would have sent, with nothing
 * signed, sent or parsed as HTTP on the way (nothing leaves the process). Null where the
 * gateway has no such call to make in process; the transport then sends a signed request.
 */
export type DirectGatewayCalls = (
  path: string,
  body: string,
  signal?: AbortSignal,
) => Promise<{ status: number; body: unknown } | null>;

export interface GatewayClientOptions {
  gatewayUrl: string;
  /**
   * With `secret`: the id the secret was issued for. Without: the name this agent enrolls
   * under (the gateway picks the id).
   */
  agentId: string;
  /** The agent's own secret (`GANTRY_AGENT_SECRET`): requests are signed as `agentId`. */
  secret?: string;
  /** The fleet's enrollment token (`GANTRY_AGENT_TOKEN`), used when there is no secret. */
  token?: string;
  /** Status sent along with every job heartbeat. */
  status?: () => AgentStatus;
  /** Called when the gateway says this agent was revoked (each time it says so). */
  onRevoked?: (error: GatewayError) => void;
  /**
   * `auto`: one WebSocket session for every call when the gateway offers it, else signed
   * HTTP; `websocket`: the session only; `http` (the default here): a signed request per call.
   */
  session?: "auto" | "websocket" | "http";
  /** Tries per call, the first included. Default 4. */
  tries?: number;
  /** Backoff between tries. Defaults: 200 ms base, 3 s cap. */
  retryBaseMs?: number;
  retryCapMs?: number;
  /** Per-request timeout. Default 10 s. */
  timeoutMs?: number;
  logger?: Logger;
  /** Instead of the default (undici on keep-alive pools): tests, an in-process gateway. */
  fetch?: typeof fetch;
  /** An in-process gateway's calls: the signed calls go here first, unsigned (see the type). */
  direct?: DirectGatewayCalls;
  /** The clock signatures are timestamped with; `Date.now` by default. */
  now?: () => number;
  /** Signing primitives; node:crypto by default. */
  crypto?: AgentCrypto;
}

/** What a call is, for the logs, and how it is made. */
export interface CallLabel {
  auth: "enrollment" | "signed";
  action: string;
  jobId?: string;
  /** This call's deadline instead of the client's (a long poll waits longer). */
  timeoutMs?: number;
  /** Ends the call, and its retries, early: it then rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** A request to take deliveries, without the fields the client fills in. */
export type TakeBody = Omit<QueueTakeRequest, "v" | "agent_id">;

/**
 * The agent's calls to the gateway's queue routes (gateway/routes/agent-queue.ts), used by
 * the gateway queue (queue.ts) when the agent holds no queue URL.
 */
export interface GatewayQueueCalls {
  info(): Promise<QueueInfo>;
  take(body: TakeBody, signal?: AbortSignal): Promise<QueueDelivery[]>;
  /** Settles that pile up behind one in flight share the next request. */
  settle(settle: QueueSettle): Promise<QueueSettleResult>;
  depth(model?: string): Promise<QueueDepthResponse>;
}
