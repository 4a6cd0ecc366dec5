import { z } from "zod";

/**
 * Agent sessions: one long-lived WebSocket per agent, opened with a signed upgrade request
 * (`GET /internal/v1/session`, signed like every agent request: shared/agent-signing.ts, so
 * the handshake is replay-safe with one nonce) and then carrying the agent's calls as
 * messages, with no signature or nonce per message. Each call names the internal route it
 * stands for and its body, and is answered with what that route would have answered, so the
 * signed HTTP API and the session are two transports of one API. Every message carries `v`
 * and a `type`; answers carry the call's `id`.
 */
export const AGENT_SESSION_PATH = "/internal/v1/session";

/** Calls one session may have unanswered at once; more wait on the agent's side. */
export const MAX_SESSION_CALLS = 256;

/** Agent → gateway: do what `POST {path}` does, with `body`. */
export const SessionCall = z.object({
  v: z.literal(1),
  type: z.literal("call"),
  id: z.number().int().min(0),
  path: z
    .string()
    .max(256)
    .regex(/^\/internal\/v1\/[A-Za-z0-9_./-]+$/),
  body: z.unknown(),
});
export type SessionCall = z.infer<typeof SessionCall>;

/** Agent → gateway: the caller gave up on call `id` (a take whose consumer stopped). */
export const SessionCancel = z.object({
  v: z.literal(1),
  type: z.literal("cancel"),
  id: z.number().int().min(0),
});
export type SessionCancel = z.infer<typeof SessionCancel>;

export const AgentSessionMessage = z.discriminatedUnion("type", [SessionCall, SessionCancel]);
export type AgentSessionMessage = z.infer<typeof AgentSessionMessage>;

/** Gateway → agent: the answer to call `id`: the route's status and JSON body. */
export const SessionAnswer = z.object({
  v: z.literal(1),
  type: z.literal("answer"),
  id: z.number().int().min(0),
  status: z.number().int().min(100).max(599),
  body: z.unknown(),
});
export type SessionAnswer = z.infer<typeof SessionAnswer>;

export const GatewaySessionMessage = z.discriminatedUnion("type", [SessionAnswer]);
export type GatewaySessionMessage = z.infer<typeof GatewaySessionMessage>;
