/**
 * The agent's signed calls to the gateway: enrollment (once, on first need), a fresh
 * signature per try, retries with backoff and jitter on what a retry can fix, and the
 * refusals that no retry fixes turned into `GatewayError`s.
 */
import { signAgentRequest } from "../../shared/agent-signing.ts";
import { nodeAgentCrypto } from "../../shared/agent-signing-node.ts";
import { AgentCredentials } from "../../shared/protocol/agent.ts";
import { backoffMs } from "../backoff.ts";
import { httpFor } from "../transfer/http.ts";
import { answerOf, parseAnswer, problemDetail, readAnswer, unexpectedAnswer } from "./answers.ts";
import type { Answer } from "./batching.ts";
import { enrollmentRefused, GatewayError, signedRequestRefused } from "./errors.ts";
import type { CallLabel, GatewayClientOptions } from "./types.ts";

/** The id the gateway knows this agent by, and the secret its requests are signed with. */
export interface Credentials {
  agentId: string;
  secret: string;
}

export interface GatewayTransport {
  /** POSTs `body` to `path`; the answer of the last try, or a `GatewayError`. */
  send(path: string, body: unknown, label: CallLabel): Promise<Answer>;
  /** Enrolls first when the agent has no secret yet. */
  ensureCredentials(): Promise<Credentials>;
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
  /** The id the agent goes by now: its enrolled one, else the configured one. */
  const currentId = () => credentials?.agentId ?? options.agentId;
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

  /** A request's headers: the enrollment token, or a signature made now (its own nonce). */
  async function headersFor(
    label: CallLabel,
    url: string,
    text: string,
  ): Promise<{ headers: Record<string, string>; signedAs: string }> {
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: "application/json, application/problem+json",
    };
    if (label.auth === "enrollment") {
      headers.authorization = `Bearer ${options.token}`;
      return { headers, signedAs: options.agentId };
    }
    const own = await ensureCredentials();
    // Signed per try: a retry with the same nonce would be refused as a replay.
    const signature = await signAgentRequest({
      ...own,
      method: "POST",
      url,
      body: text,
      now: now(),
      crypto: signingCrypto,
    });
    return { headers: { ...headers, ...signature }, signedAs: own.agentId };
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
      let answer: Answer;
      let signedAs: string;
      try {
        const direct = label.auth === "signed" && options.direct;
        const inProcess = direct ? await direct(path, text, label.signal) : null;
        if (inProcess) {
          // Nothing leaves the process: nothing to sign, send or parse as HTTP.
          signedAs = currentId();
          answer = answerOf(inProcess.status, inProcess.body);
        } else {
          const headers = await headersFor(label, url, text);
          signedAs = headers.signedAs;
          answer = readAnswer(
            await http(url, {
              method: "POST",
              headers: headers.headers,
              body: text,
              timeoutMs: label.timeoutMs ?? timeoutMs,
              ...(label.signal ? { signal: label.signal } : {}),
            }),
          );
        }
      } catch (error) {
        // A refusal to enroll (a bad token) is no failure a retry fixes.
        if (error instanceof GatewayError) throw error;
        label.signal?.throwIfAborted();
        // A plain Error's name says nothing ("Error: connect ECONNREFUSED …").
        lastError =
          error instanceof Error
            ? `${error.name === "Error" ? "" : `${error.name}: `}${error.message}`
            : String(error);
        continue;
      }
      const retryable =
        answer.status >= 500 ||
        answer.status === 429 ||
        answer.status === 408 ||
        // Only a replay of our own signature, which a fresh nonce fixes.
        (answer.status === 401 && answer.code === "replayed_request");
      if (retryable) {
        lastError = `HTTP ${answer.status}${answer.code ? ` ${answer.code}` : ""}`;
        continue;
      }
      if (answer.status === 401) {
        if (label.auth === "enrollment") throw enrollmentRefused(answer.status);
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
    currentId,
    async signedHeaders(method, url) {
      const own = await ensureCredentials();
      return signAgentRequest({ ...own, method, url, body: "", now: now(), crypto: signingCrypto });
    },
  };
}
