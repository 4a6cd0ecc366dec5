import { createMiddleware } from "hono/factory";
import { type AgentCrypto, webAgentCrypto } from "../../shared/agent-signing.ts";
import { HttpProblem } from "../../shared/errors.ts";
import type { AppEnv } from "../env.ts";
import { primeBodyText } from "../http/json-body.ts";
import type { AgentRow } from "../store/agents.ts";
import { verifyAgentRequest } from "./verify.ts";

const encoder = new TextEncoder();

/** The agent routes' context: the signed-in agent beside what every route has. */
export interface AgentEnv {
  Variables: AppEnv["Variables"] & { agent: AgentRow };
}

/**
 * The agents of open sessions (runtime/node/sessions.ts), keyed by the `env` their calls are
 * dispatched with: an object made here, which no request from outside can carry. Each call
 * asks for the agent afresh (a short cache), so a revocation or registration is seen.
 */
const sessionAgents = new WeakMap<object, () => Promise<AgentRow>>();

export function sessionEnv(agent: () => Promise<AgentRow>): object {
  const env = {};
  sessionAgents.set(env, agent);
  return env;
}

function sessionOf(env: unknown): (() => Promise<AgentRow>) | undefined {
  return typeof env === "object" && env !== null ? sessionAgents.get(env) : undefined;
}

/**
 * Signed agent requests only (see shared/agent-signing.ts). Refusals are logged with the
 * agent id and the reason, so an operator sees a revoked box still knocking; signatures
 * and secrets are never logged.
 */
export const requireSignedAgent = createMiddleware<AgentEnv>(async (c, next) => {
  const gateway = c.get("gateway");
  // A call on an agent session: the agent signed the session's handshake, not each call.
  const session = sessionOf(c.env);
  if (session) {
    c.set("agent", await session());
    return next();
  }
  const body = new Uint8Array(await c.req.arrayBuffer());
  try {
    const agent = await verifyAgentRequest(
      gateway.stores.agents,
      { method: c.req.method, path: c.req.path, header: (name) => c.req.header(name), body },
      gateway.now(),
      gateway.agentCrypto,
      gateway.agentRows,
    );
    c.set("agent", agent);
    primeBodyText(c.req.bodyCache, body);
  } catch (error) {
    if (error instanceof HttpProblem) {
      gateway.log.warn(
        {
          agent_id: c.req.header("gantry-agent-id")?.slice(0, 64),
          code: error.code,
          path: c.req.path,
        },
        "agent request refused",
      );
    }
    throw error;
  }
  await next();
});

/**
 * Enrollment only: the fleet's shared enrollment token (`GANTRY_AGENT_TOKEN`) as a bearer
 * token, compared in constant time. It buys an agent its own id and secret, nothing else.
 */
export const requireEnrollmentToken = createMiddleware<AgentEnv>(async (c, next) => {
  const match = /^Bearer\s+(\S{1,256})\s*$/i.exec(c.req.header("authorization") ?? "");
  const token = match?.[1];
  const crypto = c.get("gateway").agentCrypto ?? webAgentCrypto;
  if (!token || !(await sameSecret(crypto, token, c.get("gateway").config.agentToken))) {
    c.get("gateway").log.warn({ path: c.req.path }, "agent enrollment refused");
    throw new HttpProblem(
      401,
      "unauthorized",
      "Unauthorized",
      "Enroll with the fleet's enrollment token as `Authorization: Bearer <token>`.",
    );
  }
  await next();
});

/**
 * Compares digests, not the texts: equal lengths whatever was sent, so neither where the
 * texts differ nor how long the configured token is shows in the time a refusal takes.
 */
async function sameSecret(crypto: AgentCrypto, given: string, wanted: string): Promise<boolean> {
  const [a, b] = await Promise.all([crypto.sha256Hex(given), crypto.sha256Hex(wanted)]);
  return crypto.timingSafeEqual(encoder.encode(a), encoder.encode(b));
}
