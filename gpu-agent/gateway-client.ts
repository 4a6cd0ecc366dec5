import type { Logger } from "pino";
import type { z } from "zod";
import { type AgentCrypto, signAgentRequest } from "../shared/agent-signing.ts";
import { nodeAgentCrypto } from "../shared/agent-signing-node.ts";
import { AgentAck, AgentCredentials, AgentEventAck, Claim } from "../shared/protocol/agent.ts";
import { backoffMs } from "./backoff.ts";
import { type Answer, batchedJobCalls } from "./gateway-batching.ts";
import type { AgentStatus, GatewayClient } from "./gateway-client-types.ts";
import { enrollmentRefused, GatewayError, signedRequestRefused } from "./gateway-errors.ts";
import { type HttpAnswer, httpFor } from "./http.ts";

export type * from "./gateway-client-types.ts";
export { GatewayError } from "./gateway-errors.ts";

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
  /** The clock signatures are timestamped with; `Date.now` by default. */
  now?: () => number;
  /** Signing primitives; node:crypto by default. */
  crypto?: AgentCrypto;
  /** How long a claim or report waits for others to share its request; 0 by default. */
  callLingerMs?: number;
}

interface Credentials {
  agentId: string;
  secret: string;
}

type Auth = "enrollment" | "signed";

export function createGatewayClient(options: GatewayClientOptions): GatewayClient {
  if (!options.secret && !options.token) {
    throw new Error("the gateway client needs the agent's secret or the enrollment token");
  }
  const base = options.gatewayUrl.replace(/\/+$/, "");
  const tries = options.tries ?? 4;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const http = httpFor(options.fetch);
  const signingCrypto = options.crypto ?? nodeAgentCrypto;
  const now = options.now ?? Date.now;
  let credentials: Credentials | null = options.secret
    ? { agentId: options.agentId, secret: options.secret }
    : null;
  let enrolling: Promise<Credentials> | null = null;

  /** Enrolls at most once at a time; a failed enrollment is tried again on the next call. */
  function ensureCredentials(): Promise<Credentials> {
    if (credentials) return Promise.resolve(credentials);
    enrolling ??= enrollNow().finally(() => {
      enrolling = null;
    });
    return enrolling;
  }

  async function enrollNow(): Promise<Credentials> {
    const answer = await send(
      "/internal/v1/agents/enroll",
      { v: 1, name: options.agentId },
      {
        auth: "enrollment",
        action: "enroll",
      },
    );
    if (answer.status !== 201 && answer.status !== 200) throw unexpected("enroll", answer);
    const enrolled = parse(AgentCredentials, "enroll", answer);
    credentials = { agentId: enrolled.agent_id, secret: enrolled.secret };
    options.logger?.info(
      { agent_id: enrolled.agent_id, name: options.agentId },
      "enrolled with the gateway",
    );
    return credentials;
  }

  async function send(
    path: string,
    body: unknown,
    label: { auth: Auth; action: string; jobId?: string },
  ): Promise<Answer> {
    const url = `${base}${path}`;
    const text = JSON.stringify(body);
    let lastError = "";
    for (let attempt = 1; attempt <= tries; attempt++) {
      if (attempt > 1) {
        const delay = backoffMs(attempt - 1, {
          baseMs: options.retryBaseMs ?? 200,
          capMs: options.retryCapMs ?? 3_000,
        });
        options.logger?.warn(
          {
            job_id: label.jobId,
            action: label.action,
            try: attempt,
            delay_ms: delay,
            reason: lastError,
          },
          "gateway call failed; retrying",
        );
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
      const headers: Record<string, string> = {
        "content-type": "application/json",
        accept: "application/json, application/problem+json",
      };
      let signedAs = options.agentId;
      if (label.auth === "enrollment") {
        headers.authorization = `Bearer ${options.token}`;
      } else {
        const own = await ensureCredentials();
        signedAs = own.agentId;
        // Signed per try: a retry with the same nonce would be refused as a replay.
        Object.assign(
          headers,
          await signAgentRequest({
            ...own,
            method: "POST",
            url,
            body: text,
            now: now(),
            crypto: signingCrypto,
          }),
        );
      }
      let response: HttpAnswer;
      try {
        response = await http(url, { method: "POST", headers, body: text, timeoutMs });
      } catch (error) {
        lastError = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
        continue;
      }
      const answer = readAnswer(response);
      const retryable =
        response.status >= 500 ||
        response.status === 429 ||
        response.status === 408 ||
        // Only a replay of our own signature, which a fresh nonce fixes.
        (response.status === 401 && answer.code === "replayed_request");
      if (retryable) {
        lastError = `HTTP ${response.status}${answer.code ? ` ${answer.code}` : ""}`;
        continue;
      }
      if (response.status === 401) {
        if (label.auth === "enrollment") throw enrollmentRefused(response.status);
        const error = signedRequestRefused(answer.code, signedAs, problemDetail(answer.body));
        if (error.code === "agent_revoked") options.onRevoked?.(error);
        throw error;
      }
      return answer;
    }
    throw new GatewayError(
      `gateway unreachable after ${tries} tries: ${lastError}`,
      "gateway_unavailable",
      null,
    );
  }

  const jobCall = (jobId: string, action: string, body: unknown) =>
    send(`/internal/v1/jobs/${encodeURIComponent(jobId)}/${action}`, body, {
      auth: "signed",
      action,
      jobId,
    });

  // Claims and reports that pile up behind one in flight share the next request.
  const batched = batchedJobCalls({
    send: (path, body, action) => send(path, body, { auth: "signed", action }),
    single: (jobId, action, body) => jobCall(jobId, action, body),
    agentId: () => currentId(),
    lingerMs: options.callLingerMs ?? 0,
  });

  function unexpected(action: string, answer: Answer): GatewayError {
    const detail = problemDetail(answer.body);
    return new GatewayError(
      `unexpected gateway answer to ${action}: HTTP ${answer.status}${answer.code ? ` ${answer.code}` : ""}${detail ? `: ${detail}` : ""}`,
      answer.status === 403 && answer.code ? answer.code : "gateway_bad_response",
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
  const currentId = () => credentials?.agentId ?? options.agentId;

  return {
    get agentId() {
      return currentId();
    },

    async enroll() {
      return (await ensureCredentials()).agentId;
    },

    async register(registration) {
      const answer = await send(
        "/internal/v1/agents/register",
        { v: 1, ...registration },
        { auth: "signed", action: "register" },
      );
      if (answer.status !== 200) throw unexpected("register", answer);
      parse(AgentAck, "register", answer);
    },

    async agentHeartbeat(status) {
      const answer = await send(
        "/internal/v1/agents/heartbeat",
        { v: 1, ...status },
        { auth: "signed", action: "agent heartbeat" },
      );
      if (answer.status !== 200) throw unexpected("agent heartbeat", answer);
    },

    async claim(jobId, attempt) {
      await ensureCredentials();
      const answer = await batched.claim(jobId, { v: 1, agent_id: currentId(), attempt });
      if (answer.status === 200) return { ok: true, claim: parse(Claim, "claim", answer) };
      if (answer.status === 409 || isJobNotFound(answer)) {
        return {
          ok: false,
          status: answer.status,
          code: answer.code ?? (answer.status === 404 ? "job_not_found" : "conflict"),
          detail: problemDetail(answer.body),
        };
      }
      // 403 `model_not_registered`: not ours to run, but not to drop either: another
      // delivery (to an agent that serves the model) takes it.
      throw unexpected("claim", answer);
    },

    async heartbeat(jobId, attempt) {
      await ensureCredentials();
      const body = { v: 1, agent_id: currentId(), attempt, ...options.status?.() };
      const answer = await jobCall(jobId, "heartbeat", body);
      if (answer.status === 200) {
        return { ok: true, status: parse(AgentEventAck, "heartbeat", answer).status };
      }
      if (answer.status === 409 || answer.status === 403 || isJobNotFound(answer)) {
        return { ok: false, status: answer.status, code: answer.code ?? "conflict" };
      }
      throw unexpected("heartbeat", answer);
    },

    async report(jobId, event) {
      await ensureCredentials();
      const answer = await batched.report(jobId, { v: 1, agent_id: currentId(), ...event });
      if (answer.status === 200 || answer.status === 201 || answer.status === 202) {
        return { status: parse(AgentEventAck, "event", answer).status, duplicate: false };
      }
      if (answer.status === 409 || isJobNotFound(answer)) return { status: null, duplicate: true };
      throw unexpected("event", answer);
    },
  };
}

function readAnswer(response: HttpAnswer): Answer {
  const text = response.text();
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
