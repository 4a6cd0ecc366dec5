import {
  AGENT_HEADERS,
  type AgentCrypto,
  SIGNATURE_WINDOW_SECONDS,
  verifyAgentSignature,
  webAgentCrypto,
} from "../../shared/agent-signing.ts";
import { HttpProblem } from "../../shared/errors.ts";
import type { AgentRow, KyselyAgentStore } from "../store/agents.ts";
import type { TtlCache } from "../ttl-cache.ts";

/** The parts of an HTTP request a signature check reads. */
export interface IncomingAgentRequest {
  method: string;
  path: string;
  header(name: string): string | undefined;
  body: Uint8Array;
}

export type AgentRefusalCode =
  | "bad_signature"
  | "stale_request"
  | "replayed_request"
  | "unknown_agent"
  | "agent_revoked";

const TITLES: Record<AgentRefusalCode, string> = {
  bad_signature: "Bad signature",
  stale_request: "Stale request",
  replayed_request: "Replayed request",
  unknown_agent: "Unknown agent",
  agent_revoked: "Agent revoked",
};

/** A 401 the agent acts on by its `code`. Details name what to fix, never a secret. */
export const agentRefusal = (code: AgentRefusalCode, detail: string) =>
  new HttpProblem(401, code, TITLES[code], detail);

const AGENT_ID = /^[A-Za-z0-9._-]{1,64}$/;
const NONCE = /^[A-Za-z0-9_-]{16,128}$/;
const TIMESTAMP = /^\d{1,12}$/;

/**
 * Checks a signed agent request and returns its agent. In order: the headers are there,
 * the timestamp is within five minutes of ours (`stale_request`), the agent exists
 * (`unknown_agent`), the signature is its (`bad_signature`), it is not revoked
 * (`agent_revoked`), and the nonce is new (`replayed_request`). The nonce is recorded only
 * after the signature passed, so forged requests cannot fill the nonce table.
 *
 * `agentCrypto` is the runtime's hashing: Web Crypto by default (Workers), node:crypto on Node.
 */
export async function verifyAgentRequest(
  agents: Pick<KyselyAgentStore, "byId" | "recordNonce">,
  request: IncomingAgentRequest,
  now: number,
  agentCrypto: AgentCrypto = webAgentCrypto,
  /** Agent rows read lately; a row read here is remembered once its signature passed. */
  cache?: TtlCache<AgentRow>,
): Promise<AgentRow> {
  const agentId = request.header(AGENT_HEADERS.agentId);
  const timestampText = request.header(AGENT_HEADERS.timestamp);
  const nonce = request.header(AGENT_HEADERS.nonce);
  const signature = request.header(AGENT_HEADERS.signature);
  if (!agentId || !timestampText || !nonce || !signature) {
    throw agentRefusal(
      "bad_signature",
      `Sign agent requests: send ${Object.values(AGENT_HEADERS).join(", ")}.`,
    );
  }
  if (!AGENT_ID.test(agentId) || !NONCE.test(nonce) || !TIMESTAMP.test(timestampText)) {
    throw agentRefusal(
      "bad_signature",
      "Malformed signature headers: the agent id, nonce (16-128 URL-safe characters) or timestamp (unix seconds).",
    );
  }
  const timestamp = Number(timestampText);
  const skewSeconds = Math.round(now / 1000 - timestamp);
  if (Math.abs(skewSeconds) > SIGNATURE_WINDOW_SECONDS) {
    throw agentRefusal(
      "stale_request",
      `The request was signed ${Math.abs(skewSeconds)} s ${skewSeconds > 0 ? "ago" : "ahead"}; at most ${SIGNATURE_WINDOW_SECONDS} s either way is accepted. Check the agent host's clock.`,
    );
  }
  const agent = cache?.get(agentId) ?? (await agents.byId(agentId));
  if (!agent) throw agentRefusal("unknown_agent", `No agent ${agentId}.`);
  const valid = await verifyAgentSignature(
    agent.secret,
    {
      method: request.method,
      path: request.path,
      timestamp,
      nonce,
      bodySha256: await agentCrypto.sha256Hex(request.body),
    },
    signature,
    agentCrypto,
  );
  if (!valid) {
    throw agentRefusal("bad_signature", `The signature does not match agent ${agentId}'s secret.`);
  }
  if (agent.revoked_at !== null) {
    throw agentRefusal("agent_revoked", `Agent ${agentId} was revoked; it may make no requests.`);
  }
  cache?.set(agentId, agent);

  // Kept until the timestamp itself would be refused: a replay after that is stale anyway.
  const expiresAt = (timestamp + SIGNATURE_WINDOW_SECONDS + 1) * 1000;
  if (!(await agents.recordNonce({ agentId, nonce, expiresAt }, now))) {
    throw agentRefusal("replayed_request", "This nonce was already used: sign every request anew.");
  }
  return agent;
}
