import type { Hono } from "hono";
import {
  AGENT_HEADERS,
  SIGNATURE_WINDOW_SECONDS,
  verifyAgentSignature,
} from "../../shared/agent-signing.ts";
import { nodeAgentCrypto } from "../../shared/agent-signing-node.ts";
import { randomToken } from "../../shared/ids.ts";

/** A problem+json answer, as the gateway writes them. */
export const problem = (status: number, code: string) =>
  new Response(
    JSON.stringify({ type: `https://gantry.dev/problems/${code}`, title: code, status, code }),
    {
      status,
      headers: { "content-type": "application/problem+json" },
    },
  );

export interface StubAgents {
  /** Agents by id: their secret, and whether they were revoked. */
  agents: Map<string, { secret: string; revoked: boolean }>;
  /** Signed requests received, by path (`/internal/v1/jobs/claims`, …): batch sizes. */
  requests: Map<string, number>;
  /** The agent that signed `request`; "" for a request that did not pass the check. */
  signer(request: Request): string;
}

/**
 * The stub gateway's enrollment and signature check, as the Node gateway does them
 * (shared/agent-signing.ts on node:crypto), keeping its agents and nonces in memory; an
 * enrolled agent's id is the name it asked for. Mounted on `app` ahead of the routes it
 * guards; `onEnroll` hears of each enrollment, with the status it was answered.
 */
export function mountStubAgentAuth(
  app: Hono,
  token: string,
  onEnroll: (body: unknown, status: number) => void,
): StubAgents {
  const agents = new Map<string, { secret: string; revoked: boolean }>();
  const nonces = new Set<string>();
  const signedBy = new WeakMap<Request, string>();

  app.post("/internal/v1/agents/enroll", async (c) => {
    const raw = (await c.req.json()) as { name?: string };
    if (c.req.header("authorization") !== `Bearer ${token}`) {
      onEnroll(raw, 401);
      return problem(401, "unauthorized");
    }
    const agentId = raw.name ?? `stub-agent-${agents.size + 1}`;
    const secret = `gas_${randomToken(32)}`;
    agents.set(agentId, { secret, revoked: false });
    onEnroll(raw, 201);
    return c.json({ v: 1, agent_id: agentId, secret }, 201);
  });
  const requests = new Map<string, number>();
  app.use("/internal/*", async (c, next) => {
    const route = c.req.path.replace(/\/jobs\/job_[^/]+\//, "/jobs/{id}/");
    requests.set(route, (requests.get(route) ?? 0) + 1);
    const agentId = c.req.header(AGENT_HEADERS.agentId) ?? "";
    const timestamp = Number(c.req.header(AGENT_HEADERS.timestamp));
    const nonce = c.req.header(AGENT_HEADERS.nonce) ?? "";
    const agent = agents.get(agentId);
    if (!agent) return problem(401, "unknown_agent");
    if (Math.abs(Date.now() / 1000 - timestamp) > SIGNATURE_WINDOW_SECONDS) {
      return problem(401, "stale_request");
    }
    const body = new Uint8Array(await c.req.arrayBuffer());
    const parts = {
      method: c.req.method,
      path: c.req.path,
      timestamp,
      nonce,
      bodySha256: nodeAgentCrypto.sha256Hex(body),
    };
    const signature = c.req.header(AGENT_HEADERS.signature) ?? "";
    if (!(await verifyAgentSignature(agent.secret, parts, signature, nodeAgentCrypto))) {
      return problem(401, "bad_signature");
    }
    if (agent.revoked) return problem(401, "agent_revoked");
    if (nonces.has(`${agentId} ${nonce}`)) return problem(401, "replayed_request");
    nonces.add(`${agentId} ${nonce}`);
    signedBy.set(c.req.raw, agentId);
    // Decoded once here, as the gateway's middleware does: asked for the text after the
    // bytes, Hono would wrap them in a new Response. (Hono caches promises.)
    c.req.bodyCache.text = Promise.resolve(new TextDecoder().decode(body)) as unknown as string;
    await next();
  });

  return { agents, requests, signer: (request) => signedBy.get(request) ?? "" };
}
