/**
 * The agent's signed calls to the gateway: enrollment (once, on first need), a fresh
 * signature per try, retries with backoff and jitter on what a retry can fix, and the
 * refusals that no retry fixes turned into `GatewayError`s.
 */
import { signAgentRequest } from "../../shared/agent-signing.ts";
import { nodeAgentCrypto } from "../../shared/agent-signing-node.ts";
import { AgentCredentials } from "../../shared/protocol/agent.ts";
import { backoffMs } from "../backoff.ts";
import { type HttpAnswer, httpFor } from "../transfer/http.ts";
import { parseAnswer, problemDetail, readAnswer, unexpectedAnswer } from "./answers.ts";
import type { Answer } from "./batching.ts";
import { enrollmentRefused, GatewayError, signedRequestRefused } from "./errors.ts";
import type { CallLabel, GatewayClientOptions } from "./types.ts";

interface Credentials {
  agentId: string;
  secret: string;
}

export interface GatewayTransport {
  /** POSTs `body` to `path`; the answer of the last try, or a `GatewayError`. */
  send(path: string, body: unknown, label: CallLabel): Promise<Answer>;
  /** Enrolls first when the agent has no secret yet. */
  ensureCredentials(): Promise<{ agentId: string }>;
  /** The id the gateway knows this agent by: the enrolled one once enrolled. */
  currentId(): string;
}

/** The signed HTTP transport, which can also sign a request it does not send itself. */
export interface HttpGatewayTransport extends GatewayTransport {
  /** The signature headers of a bodiless request (an agent session's upgrade). */
  signedHeaders(method: string, url: string): Promise<Record<string, string>>;
}

export function createGatewayTransport(options: GatewayClientOptions): HttpGatewayTransport {
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
    if (answer.status !== 201 && answer.status !== 200) throw unexpectedAnswer("enroll", answer);
    const enrolled = parseAnswer(AgentCredentials, "enroll", answer);
    credentials = { agentId: enrolled.agent_id, secret: enrolled.secret };
    // The logger's lines name the agent as configured; the gateway's id is new here.
    options.logger?.info({ enrolled_as: enrolled.agent_id }, "enrolled with the gateway");
    return credentials;
  }

  async function send(path: string, body: unknown, label: CallLabel): Promise<Answer> {
    const url = `${base}${path}`;
    const text = JSON.stringify(body);
    let lastError = "";
    for (let attempt = 1; attempt <= tries; attempt++) {
      label.signal?.throwIfAborted();
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
        response = await http(url, {
          method: "POST",
          headers,
          body: text,
          timeoutMs: label.timeoutMs ?? timeoutMs,
          ...(label.signal ? { signal: label.signal } : {}),
        });
      } catch (error) {
        label.signal?.throwIfAborted();
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

  return {
    send,
    ensureCredentials,
    currentId: () => credentials?.agentId ?? options.agentId,
    async signedHeaders(method, url) {
      const own = await ensureCredentials();
      return signAgentRequest({ ...own, method, url, body: "", now: now(), crypto: signingCrypto });
    },
  };
}
