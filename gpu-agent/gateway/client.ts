import { AgentEventAck, AgentRegistered, Claim } from "../../shared/protocol/agent.ts";
import { parseAnswer, problemDetail, unexpectedAnswer } from "./answers.ts";
import { type Answer, batchedJobCalls } from "./batching.ts";
import { ClaimsAhead } from "./claims-ahead.ts";
import { gatewayQueueCalls } from "./queue-calls.ts";
import { createSessionTransport } from "./session.ts";
import { createGatewayTransport } from "./transport.ts";
import type { GatewayClient, GatewayClientOptions } from "./types.ts";

export { GatewayError } from "./errors.ts";
export type * from "./types.ts";

/** The agent's side of the gateway's internal API; see `GatewayClient`. */
export function createGatewayClient(options: GatewayClientOptions): GatewayClient {
  const http = createGatewayTransport(options);
  const mode = options.session ?? "http";
  // An injected fetch is an in-process gateway (tests, `gantry start`): no socket to open.
  const inProcess = Boolean(options.fetch || options.direct);
  const session =
    mode === "http" || (mode === "auto" && inProcess)
      ? null
      : createSessionTransport(options, http, mode);
  const { send, ensureCredentials, currentId } = session ?? http;

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
    inProcess,
  });

  /**
   * A 404 means "no such job" only when the gateway said so in problem+json; a bare 404
   * is more likely a wrong gateway URL, and acking on it would silently drop every job.
   */
  const isJobNotFound = (answer: Answer) => answer.status === 404 && answer.code !== null;
  const claimsAhead = new ClaimsAhead();

  return {
    get agentId() {
      return currentId();
    },

    queue: gatewayQueueCalls(send, currentId, claimsAhead),

    claimedAhead: (jobId, attempt) => claimsAhead.take(jobId, attempt)?.status === 200,

    async close() {
      await session?.close();
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
      if (answer.status !== 200) throw unexpectedAnswer("register", answer);
      return { unserved: parseAnswer(AgentRegistered, "register", answer).unserved ?? [] };
    },

    async agentHeartbeat(status) {
      const answer = await send(
        "/internal/v1/agents/heartbeat",
        { v: 1, ...status },
        { auth: "signed", action: "agent heartbeat" },
      );
      if (answer.status !== 200) throw unexpectedAnswer("agent heartbeat", answer);
    },

    async claim(jobId, attempt) {
      await ensureCredentials();
      const answer =
        claimsAhead.take(jobId, attempt) ??
        (await batched.claim(jobId, { v: 1, agent_id: currentId(), attempt }));
      if (answer.status === 200) return { ok: true, claim: parseAnswer(Claim, "claim", answer) };
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
      throw unexpectedAnswer("claim", answer);
    },

    async heartbeat(jobId, attempt, progress) {
      await ensureCredentials();
      const status = options.status?.();
      const body = {
        v: 1,
        agent_id: currentId(),
        attempt,
        ...(progress && { progress }),
        ...status,
      };
      const answer = await jobCall(jobId, "heartbeat", body);
      if (answer.status === 200) {
        return { ok: true, status: parseAnswer(AgentEventAck, "heartbeat", answer).status };
      }
      if (answer.status === 409 || answer.status === 403 || isJobNotFound(answer)) {
        return { ok: false, status: answer.status, code: answer.code ?? "conflict" };
      }
      throw unexpectedAnswer("heartbeat", answer);
    },

    async report(jobId, event, options) {
      await ensureCredentials();
      const body = { v: 1, agent_id: currentId(), ...event };
      const answer = await batched.report(jobId, body, options?.lingerMs);
      if (answer.status === 200 || answer.status === 201 || answer.status === 202) {
        const { status, acked } = parseAnswer(AgentEventAck, "event", answer);
        return { status, duplicate: false, ...(acked !== undefined && { acked }) };
      }
      if (answer.status === 409 || isJobNotFound(answer)) return { status: null, duplicate: true };
      throw unexpectedAnswer("event", answer);
    },
  };
}
