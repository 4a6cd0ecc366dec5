import { upgradeWebSocket } from "@hono/node-server";
import type { Hono } from "hono";
import { Hono as HonoApp } from "hono";
import { WebSocketServer } from "ws";
import { HttpProblem } from "../../../shared/errors.ts";
import {
  AGENT_SESSION_PATH,
  AgentSessionMessage,
  MAX_SESSION_CALLS,
  type SessionAnswer,
  type SessionCall,
} from "../../../shared/protocol/agent-session.ts";
import { answerDirect, type FoundCall } from "../../agents/calls.ts";
import { sessionEnv } from "../../agents/middleware.ts";
import { agentRefusal, verifyAgentRequest } from "../../agents/verify.ts";
import type { Gateway } from "../../context.ts";
import type { AppEnv } from "../../env.ts";
import { PROBLEM_BASE } from "../../http/problem.ts";
import type { AgentRow } from "../../store/agents.ts";
import {
  directCall,
  findCall,
  type InProcessCalls,
  inProcessCall,
  plainPath,
} from "./direct-calls.ts";

/**
 * Agent sessions on the Node gateway (shared/protocol/agent-session.ts): the upgrade request
 * is verified as any signed agent request (one nonce per session), then each call is
 * dispatched to the app's own internal route with the session's agent, so a session call
 * and a signed HTTP request run the same code; only the signature and its nonce row go.
 * Calls run concurrently, up to MAX_SESSION_CALLS a session; a call cut by the session's
 * end is aborted (a waiting take stops waiting).
 */
export interface AgentSessions {
  /** For `serve({ websocket: { server } })`. */
  readonly server: WebSocketServer;
  /**
   * Whether a request is a WebSocket upgrade, for this handler rather than the app: the
   * session path's, and every other one, which it refuses (`notServed`).
   */
  handles(request: Request): boolean;
  fetch(request: Request, env: unknown): Response | Promise<Response>;
  /** Calls the gateway's app once it is built (it needs the listening server's URL). */
  attach(gateway: Gateway, app: Hono<AppEnv>): void;
  /**
   * Ends every session (the agents reconnect, to this gateway's successor), its calls cut (a
   * waiting take stops) and answered first: none is left to a closed database or socket.
   */
  closeAll(): Promise<void>;
  /** An in-process agent's calls, dispatched as a session's (NodeGateway.agentFetch). */
  agentFetch(agentId: string): typeof fetch;
  /** The same calls without a Request or a Response (NodeGateway.agentCalls). */
  agentCalls(agentId: string): InProcessCalls;
}

const OPEN = 1;

/**
 * Whether a call's body is over the JSON body limit. A body serializes to no more than it
 * took in its message, so a message within the limit needs no second look.
 */
function tooLarge(message: string, call: SessionCall, maxBytes: number): boolean {
  if (Buffer.byteLength(message) <= maxBytes) return false;
  return Buffer.byteLength(JSON.stringify(call.body ?? null)) > maxBytes;
}

/**
 * An upgrade anywhere but the session path. @hono/node-server answers an upgrade request
 * with the app's status and headers and never reads or cancels the body, so the app must not
 * run for it: `GET /v1/events` started a stream nobody would read, holding a slot of the
 * tenant's for 15 minutes. The body is dropped on that path too: the header says why.
 */
function notServed(): Response {
  const detail = `WebSocket upgrades are served on ${AGENT_SESSION_PATH} only; send this request without Upgrade.`;
  return Response.json(
    {
      type: `${PROBLEM_BASE}websocket_not_served`,
      title: "WebSocket not served",
      status: 400,
      code: "websocket_not_served",
      detail,
    },
    {
      status: 400,
      headers: {
        "content-type": "application/problem+json",
        "gantry-refusal": "websocket_not_served",
      },
    },
  );
}

export function agentSessions(): AgentSessions {
  const server = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  let attached: { gateway: Gateway; app: Hono<AppEnv> } | null = null;
  const open = new Set<ReturnType<typeof openSession>>();
  const routes = new HonoApp<{ Variables: { agent: AgentRow } }>().get(
    AGENT_SESSION_PATH,
    async (c, next) => {
      if (!attached) return c.body(null, 503);
      const { gateway } = attached;
      try {
        const agent = await verifyAgentRequest(
          gateway.stores.agents,
          {
            method: "GET",
            path: c.req.path,
            header: (name) => c.req.header(name),
            body: new Uint8Array(),
          },
          gateway.now(),
          gateway.agentCrypto,
          gateway.agentRows,
        );
        c.set("agent", agent);
      } catch (error) {
        if (!(error instanceof HttpProblem)) throw error;
        gateway.log.warn({ code: error.code }, "agent session refused");
        // The handshake's refusal has no body: the code travels in a header.
        const headers = { "gantry-refusal": error.code };
        return new Response(null, { status: error.status, headers });
      }
      return next();
    },
    upgradeWebSocket((c) => {
      const agentId = c.get("agent").id;
      let session: ReturnType<typeof openSession> | null = null;
      return {
        onOpen: (_event, ws) => {
          if (attached) session = openSession(attached, agentId, (reply) => ws.send(reply), ws);
          if (session) open.add(session);
        },
        onMessage: (event, ws) => {
          if (typeof event.data !== "string") return ws.close(1003, "text messages only");
          session?.receive(event.data);
        },
        onClose: () => {
          session?.end();
          if (session) open.delete(session);
        },
      };
    }),
  );

  return {
    server,
    handles: (request) => request.headers.get("upgrade")?.toLowerCase() === "websocket",
    fetch: (request, env) =>
      new URL(request.url).pathname === AGENT_SESSION_PATH
        ? routes.fetch(request, env)
        : notServed(),
    attach(gateway, app) {
      attached = { gateway, app };
    },
    async closeAll() {
      await Promise.all([...open].map((session) => session.stop()));
      for (const client of server.clients) client.close(1001, "gateway stopping");
    },
    agentFetch(agentId) {
      let env: object | null = null;
      let agent: (() => Promise<AgentRow>) | null = null;
      return async (input, init) => {
        if (!attached) return new Response("starting", { status: 503 });
        agent ??= sessionAgent(attached.gateway, agentId);
        env ??= sessionEnv(agent);
        const direct = await inProcessCall(attached.gateway, agent, input, init);
        return direct ?? attached.app.fetch(new Request(input, init), env);
      };
    },
    agentCalls(agentId) {
      let agent: (() => Promise<AgentRow>) | null = null;
      // Before the app is built, and for what is no call, null: the agent then sends a
      // request through its fetch (agentFetch), which answers those.
      return async (path, text, signal) => {
        if (!attached) return null;
        agent ??= sessionAgent(attached.gateway, agentId);
        return directCall(attached.gateway, agent, path, text, signal);
      };
    },
  };
}

/**
 * What a session's calls run with: its agent, read through the gateway's short cache so a
 * revocation or a new registration shows.
 */
function sessionAgent(gateway: Gateway, agentId: string): () => Promise<AgentRow> {
  return async () => {
    const row = gateway.agentRows.get(agentId) ?? (await gateway.stores.agents.byId(agentId));
    if (!row) throw agentRefusal("unknown_agent", `No agent ${agentId}.`);
    if (row.revoked_at !== null) {
      throw agentRefusal("agent_revoked", `Agent ${agentId} was revoked; it may make no requests.`);
    }
    gateway.agentRows.set(agentId, row);
    return row;
  };
}

function openSession(
  { gateway, app }: { gateway: Gateway; app: Hono<AppEnv> },
  agentId: string,
  send: (text: string) => void,
  ws: { readonly readyState: number; close(code?: number, reason?: string): void },
) {
  const agent = sessionAgent(gateway, agentId);
  const env = sessionEnv(agent);
  const calls = new Map<number, AbortController>();
  const running = new Set<Promise<void>>();
  let stopping = false;
  gateway.log.info({ agent_id: agentId }, "agent session opened");

  const answer = (call: SessionCall, status: number, body: unknown) => {
    calls.delete(call.id);
    if (ws.readyState !== OPEN) return;
    send(
      JSON.stringify({ v: 1, type: "answer", id: call.id, status, body } satisfies SessionAnswer),
    );
  };

  /** Through the app, as a signed request would go: any path but the calls themselves. */
  const viaApp = async (call: SessionCall, signal: AbortSignal) => {
    const response = await app.fetch(
      new Request(`http://session${call.path}`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify(call.body ?? null),
        signal,
      }),
      env,
    );
    const text = await response.text();
    answer(call, response.status, text ? JSON.parse(text) : null);
  };

  /** A call of the agent API (agents/calls.ts), answered as its route would answer. */
  const direct = async (
    message: string,
    call: SessionCall,
    found: FoundCall,
    signal: AbortSignal,
  ) => {
    const { status, body } = await answerDirect(found, {
      gateway,
      agent,
      path: call.path,
      body: call.body ?? null,
      bodyOver: (maxBytes) => tooLarge(message, call, maxBytes),
      signal,
    });
    answer(call, status, body);
  };

  const run = (message: string, call: SessionCall, signal: AbortSignal) => {
    const found = plainPath(call.path) ? findCall(call.path) : null;
    return found ? direct(message, call, found, signal) : viaApp(call, signal);
  };

  return {
    receive(text: string) {
      let message: AgentSessionMessage;
      try {
        message = AgentSessionMessage.parse(JSON.parse(text));
      } catch {
        ws.close(1007, "not a session message");
        return;
      }
      if (message.type === "cancel") {
        calls.get(message.id)?.abort();
        return;
      }
      if (stopping) return; // unanswered: the agent sends it again on its next session
      if (calls.size >= MAX_SESSION_CALLS || calls.has(message.id)) {
        const problem = { code: "too_many_calls", detail: "Wait for answers before calling more." };
        return answer(message, 429, problem);
      }
      const controller = new AbortController();
      calls.set(message.id, controller);
      const done = run(text, message, controller.signal)
        .catch((error: unknown) => {
          gateway.log.error({ err: String(error), path: message.path }, "session call failed");
          answer(message, 500, { code: "internal_error" });
        })
        .finally(() => running.delete(done));
      running.add(done);
    },
    /** Cuts the calls under way and resolves once each is answered; runs no more. */
    async stop() {
      stopping = true;
      for (const controller of calls.values()) controller.abort();
      await Promise.all(running);
    },
    end() {
      for (const controller of calls.values()) controller.abort();
      calls.clear();
      gateway.log.info({ agent_id: agentId }, "agent session closed");
    },
  };
}
