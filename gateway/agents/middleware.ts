import { createMiddleware } from "hono/factory";
import { HttpProblem } from "../../shared/errors.ts";
import type { AppEnv } from "../env.ts";
import { primeBodyText } from "../json-body.ts";
import type { AgentRow } from "./store.ts";
import { verifyAgentRequest } from "./verify.ts";

/** The agent routes' context: the signed-in agent beside what every route has. */
export interface AgentEnv {
  Variables: AppEnv["Variables"] & { agent: AgentRow };
}

/**
 * Signed agent requests only (see shared/agent-signing.ts). Refusals are logged with the
 * agent id and the reason, so an operator sees a revoked box still knocking; signatures
 * and secrets are never logged.
 */
export const requireSignedAgent = createMiddleware<AgentEnv>(async (c, next) => {
  const gateway = c.var.gateway;
  const body = new Uint8Array(await c.req.arrayBuffer());
  try {
    const agent = await verifyAgentRequest(
      gateway.db,
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
  if (!token || !constantTimeEqual(token, c.var.gateway.config.agentToken)) {
    c.var.gateway.log.warn({ path: c.req.path }, "agent enrollment refused");
    throw new HttpProblem(
      401,
      "unauthorized",
      "Unauthorized",
      "Enroll with the fleet's enrollment token as `Authorization: Bearer <token>`.",
    );
  }
  await next();
});

function constantTimeEqual(a: string, b: string): boolean {
  const left = new TextEncoder().encode(a);
  const right = new TextEncoder().encode(b);
  let diff = left.length ^ right.length;
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    diff |= (left[i] ?? 0) ^ (right[i] ?? 0);
  }
  return diff === 0;
}
