import type { Logger } from "pino";
import type { z } from "zod";
import type { AgentEvent } from "../shared/protocol/agent.ts";
import { AgentEventAck, Claim } from "../shared/protocol/agent.ts";
import { backoffMs } from "./backoff.ts";

/**
 * The agent's side of the gateway's internal API (`/internal/v1/jobs/{id}/…`). Transient
 * trouble (network errors, timeouts, 5xx, 429) is retried here with backoff and jitter;
 * what is left is either an answer the supervisor acts on or a `GatewayError`.
 */
export interface GatewayClient {
  readonly agentId: string;
  claim(jobId: string, attempt: number): Promise<ClaimOutcome>;
  heartbeat(jobId: string, attempt: number): Promise<HeartbeatOutcome>;
  /** Idempotent per job and attempt: a 409 (already recorded, stale) counts as recorded. */
  report(jobId: string, event: AgentEventBody): Promise<ReportOutcome>;
}

/** An AgentEvent without the fields the client fills in (`v`, `agent_id`). */
export type AgentEventBody = AgentEvent extends infer E
  ? E extends AgentEvent
    ? Omit<E, "v" | "agent_id">
    : never
  : never;

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
}

/**
 * A gateway call that failed after its retries, or got an answer the agent cannot act on.
 * The supervisor leaves the job to another delivery: it never acks on one of these.
 */
export class GatewayError extends Error {
  override name = "GatewayError";
  constructor(
    message: string,
    readonly code: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

export interface GatewayClientOptions {
  gatewayUrl: string;
  token: string;
  agentId: string;
  /** Tries per call, the first included. Default 4. */
  tries?: number;
  /** Backoff between tries. Defaults: 200 ms base, 3 s cap. */
  retryBaseMs?: number;
  retryCapMs?: number;
  /** Per-request timeout. Default 10 s. */
  timeoutMs?: number;
  logger?: Logger;
  fetch?: typeof fetch;
}

interface Answer {
  status: number;
  body: unknown;
  /** A problem+json `code`, when the body was one. */
  code: string | null;
}

export function createGatewayClient(options: GatewayClientOptions): GatewayClient {
  const base = options.gatewayUrl.replace(/\/+$/, "");
  const tries = options.tries ?? 4;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const doFetch = options.fetch ?? fetch;
  const agentId = options.agentId;

  async function call(jobId: string, action: string, body: unknown): Promise<Answer> {
    const url = `${base}/internal/v1/jobs/${encodeURIComponent(jobId)}/${action}`;
    let lastError = "";
    for (let attempt = 1; attempt <= tries; attempt++) {
      if (attempt > 1) {
        const delay = backoffMs(attempt - 1, {
          baseMs: options.retryBaseMs ?? 200,
          capMs: options.retryCapMs ?? 3_000,
        });
        options.logger?.warn(
          { job_id: jobId, action, try: attempt, delay_ms: delay, reason: lastError },
          "gateway call failed; retrying",
        );
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
      let response: Response;
      try {
        response = await doFetch(url, {
          method: "POST",
          headers: {
            authorization: `Bearer ${options.token}`,
            "content-type": "application/json",
            accept: "application/json, application/problem+json",
          },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        lastError = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
        continue;
      }
      const answer = await readAnswer(response);
      if (response.status >= 500 || response.status === 429 || response.status === 408) {
        lastError = `HTTP ${response.status}${answer.code ? ` ${answer.code}` : ""}`;
        continue;
      }
      if (response.status === 401 || response.status === 403) {
        throw new GatewayError(
          `the gateway refused the agent token (HTTP ${response.status}); check GANTRY_AGENT_TOKEN`,
          "gateway_unauthorized",
          response.status,
        );
      }
      return answer;
    }
    throw new GatewayError(
      `gateway unreachable after ${tries} tries: ${lastError}`,
      "gateway_unavailable",
      null,
    );
  }

  function unexpected(action: string, answer: Answer): GatewayError {
    return new GatewayError(
      `unexpected gateway answer to ${action}: HTTP ${answer.status}${answer.code ? ` ${answer.code}` : ""}`,
      "gateway_bad_response",
      answer.status,
    );
  }

  function parse<T extends z.ZodType>(schema: T, action: string, answer: Answer): z.infer<T> {
    const result = schema.safeParse(answer.body);
    if (!result.success) {
      throw new GatewayError(
        `malformed gateway answer to ${action}: ${result.error.issues[0]?.message ?? "invalid"}`,
        "gateway_bad_response",
        answer.status,
      );
    }
    return result.data;
  }

  /**
   * A 404 means "no such job" only when the gateway said so in problem+json; a bare 404
   * is more likely a wrong gateway URL, and acking on it would silently drop every job.
   */
  const isJobNotFound = (answer: Answer) => answer.status === 404 && answer.code !== null;

  return {
    agentId,

    async claim(jobId, attempt) {
      const answer = await call(jobId, "claim", { v: 1, agent_id: agentId, attempt });
      if (answer.status === 200) return { ok: true, claim: parse(Claim, "claim", answer) };
      if (answer.status === 409 || isJobNotFound(answer)) {
        return {
          ok: false,
          status: answer.status,
          code: answer.code ?? (answer.status === 404 ? "job_not_found" : "conflict"),
          detail: problemDetail(answer.body),
        };
      }
      throw unexpected("claim", answer);
    },

    async heartbeat(jobId, attempt) {
      const answer = await call(jobId, "heartbeat", { v: 1, agent_id: agentId, attempt });
      if (answer.status === 200) {
        return { ok: true, status: parse(AgentEventAck, "heartbeat", answer).status };
      }
      if (answer.status === 409 || isJobNotFound(answer)) {
        return { ok: false, status: answer.status, code: answer.code ?? "conflict" };
      }
      throw unexpected("heartbeat", answer);
    },

    async report(jobId, event) {
      const answer = await call(jobId, "events", { v: 1, agent_id: agentId, ...event });
      if (answer.status === 200 || answer.status === 201 || answer.status === 202) {
        return { status: parse(AgentEventAck, "event", answer).status, duplicate: false };
      }
      if (answer.status === 409 || isJobNotFound(answer)) return { status: null, duplicate: true };
      throw unexpected("event", answer);
    },
  };
}

async function readAnswer(response: Response): Promise<Answer> {
  const text = await response.text().catch(() => "");
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = text;
  }
  const code =
    body !== null && typeof body === "object" && "code" in body && typeof body.code === "string"
      ? body.code
      : null;
  return { status: response.status, body, code };
}

function problemDetail(body: unknown): string | null {
  if (body !== null && typeof body === "object" && "detail" in body) {
    return typeof body.detail === "string" ? body.detail : null;
  }
  return null;
}
