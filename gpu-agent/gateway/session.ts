import WebSocket from "ws";
import {
  AGENT_SESSION_PATH,
  GatewaySessionMessage,
  MAX_SESSION_CALLS,
} from "../../shared/protocol/agent-session.ts";
import { peerRetryDelayMs } from "../backoff.ts";
import { problemDetail } from "./answers.ts";
import type { Answer } from "./batching.ts";
import { GatewayError, signedRequestRefused } from "./errors.ts";
import type { GatewayTransport, HttpGatewayTransport } from "./transport.ts";
import type { CallLabel, GatewayClientOptions } from "./types.ts";

/** `auto`: a session when the gateway offers one (Node), else signed HTTP (Workers). */
export type SessionMode = "auto" | "websocket";

interface Call {
  id: number;
  /** Taken off the caller's signal once the call is done. */
  onAbort?: () => void;
  path: string;
  body: unknown;
  label: CallLabel;
  text: string;
  sent: boolean;
  tries: number;
  resolve(answer: Answer): void;
  reject(error: unknown): void;
  timer: ReturnType<typeof setTimeout>;
}

/** How often the agent pings its session; a ping unanswered by the next one ends it. */
const PING_MS = 15_000;

/**
 * The agent's calls on one WebSocket session (shared/protocol/agent-session.ts) instead of
 * one signed request each: the upgrade is signed once (with a nonce), then every call is a
 * message answered by id, as the route would have answered it over HTTP, so everything
 * above this transport is unchanged. Flow control is the calls' own: a take asks for as
 * many deliveries as the agent has free slots, and at most MAX_SESSION_CALLS calls are out
 * at once (the rest wait here, backpressure on the caller).
 *
 * A cut (network, gateway restart) ends the session: the agent reconnects with backoff and
 * jitter and sends again every call not yet answered, as the HTTP transport retries a
 * request whose answer was lost; each is idempotent per job and attempt, or guarded by its
 * lease, so nothing runs twice and no lease is dropped. A gateway with no sessions (404 on
 * the upgrade: Workers, or older) switches `auto` to signed HTTP for good.
 */
export function createSessionTransport(
  options: GatewayClientOptions,
  http: HttpGatewayTransport,
  mode: SessionMode,
): GatewayTransport & { close(): Promise<void> } {
  const url = `${options.gatewayUrl.replace(/\/+$/, "").replace(/^http/, "ws")}${AGENT_SESSION_PATH}`;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const tries = options.tries ?? 4;
  const calls = new Map<number, Call>();
  let nextId = 0;
  let socket: WebSocket | null = null;
  let connecting = false;
  let failures = 0;
  let overHttp = false;
  let closed = false;
  let ping: ReturnType<typeof setInterval> | undefined;

  const finish = (call: Call) => {
    clearTimeout(call.timer);
    calls.delete(call.id);
    if (call.onAbort) call.label.signal?.removeEventListener("abort", call.onAbort);
  };

  function flush() {
    if (!socket || socket.readyState !== WebSocket.OPEN) return void connect();
    let out = 0;
    for (const call of calls.values()) if (call.sent) out++;
    for (const call of calls.values()) {
      if (call.sent) continue;
      if (out >= MAX_SESSION_CALLS) break;
      socket.send(call.text);
      call.sent = true;
      out++;
    }
  }

  function toHttp(reason: string) {
    overHttp = true;
    options.logger?.info({ reason }, "the gateway offers no agent sessions; using signed HTTP");
    for (const call of [...calls.values()]) {
      finish(call);
      http.send(call.path, call.body, call.label).then(call.resolve, call.reject);
    }
  }

  function connect() {
    if (connecting || closed || overHttp || calls.size === 0) return;
    connecting = true;
    void open().finally(() => {
      connecting = false;
    });
  }

  async function open(): Promise<void> {
    while (!closed && !overHttp && calls.size > 0) {
      const outcome = await openOnce().catch(() => "retry" as const);
      if (outcome === "open") {
        failures = 0;
        return flush();
      }
      if (outcome === "stop") return;
      if (++failures >= tries) {
        // As the HTTP transport gives a call up after its tries: the caller decides (the
        // supervisor holds the job and calls again), and the next call connects afresh.
        failures = 0;
        const error = new GatewayError(
          `gateway unreachable after ${tries} tries: the agent session could not be opened`,
          "gateway_unavailable",
          null,
        );
        for (const call of [...calls.values()]) {
          finish(call);
          call.reject(error);
        }
        return;
      }
      const delay = peerRetryDelayMs(failures, { baseMs: 250, capMs: 3_000 });
      options.logger?.warn({ try: failures, delay_ms: delay }, "agent session down; reconnecting");
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }

  async function openOnce(): Promise<"open" | "retry" | "stop"> {
    const headers = await http.signedHeaders("GET", url.replace(/^ws/, "http"));
    const ws = new WebSocket(url, {
      headers,
      perMessageDeflate: false,
      handshakeTimeout: timeoutMs,
    });
    return new Promise((resolve) => {
      ws.once("open", () => {
        socket = ws;
        wire(ws);
        resolve("open");
      });
      ws.once("unexpected-response", (_request, response) => {
        const status = response.statusCode ?? 0;
        const code = response.headers["gantry-refusal"];
        response.resume();
        ws.terminate();
        if (status === 401 && typeof code === "string" && code !== "replayed_request") {
          const error = signedRequestRefused(code, http.currentId(), null);
          if (error.code === "agent_revoked") options.onRevoked?.(error);
          for (const call of [...calls.values()]) {
            finish(call);
            call.reject(error);
          }
          return resolve("stop");
        }
        if (mode === "auto" && [400, 404, 405, 426, 501].includes(status)) {
          toHttp(`HTTP ${status} to the session upgrade`);
          return resolve("stop");
        }
        resolve("retry");
      });
      ws.once("error", () => resolve("retry"));
    });
  }

  function wire(ws: WebSocket) {
    let alive = true;
    ping = setInterval(() => {
      if (!alive) return ws.terminate();
      alive = false;
      ws.ping();
    }, PING_MS);
    ping.unref();
    ws.on("pong", () => {
      alive = true;
    });
    ws.on("message", (data, isBinary) => {
      if (isBinary) return;
      const parsed = GatewaySessionMessage.safeParse(parseJson(String(data)));
      if (!parsed.success) return;
      const { id, status, body } = parsed.data;
      const call = calls.get(id);
      if (!call) return;
      if ((status >= 500 || status === 429) && ++call.tries < tries) {
        // As the HTTP transport retries these: sent again after a pause.
        call.sent = false;
        setTimeout(flush, peerRetryDelayMs(call.tries, { baseMs: 200, capMs: 3_000 }));
        return flush();
      }
      finish(call);
      const code =
        body !== null && typeof body === "object" && "code" in body && typeof body.code === "string"
          ? body.code
          : null;
      if (status === 401) {
        // As the HTTP transport: the gateway refused this agent's credentials (revoked
        // since the session opened), which is an error, and a revocation stops the agent.
        const error = signedRequestRefused(code, http.currentId(), problemDetail(body));
        if (error.code === "agent_revoked") options.onRevoked?.(error);
        call.reject(error);
      } else {
        call.resolve({ status, body, code });
      }
      flush();
    });
    ws.on("close", () => {
      clearInterval(ping);
      if (socket === ws) socket = null;
      // Unanswered calls go again on the next session.
      for (const call of calls.values()) call.sent = false;
      connect();
    });
    ws.on("error", () => {});
  }

  function call(path: string, body: unknown, label: CallLabel): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const id = nextId++;
      const deadline = label.timeoutMs ?? timeoutMs * tries;
      const entry: Call = {
        id,
        path,
        body,
        label,
        text: JSON.stringify({ v: 1, type: "call", id, path, body }),
        sent: false,
        tries: 0,
        resolve,
        reject,
        timer: setTimeout(() => {
          finish(entry);
          const why = `no answer to ${label.action} within ${deadline / 1000} s on the agent session`;
          reject(new GatewayError(`gateway unreachable: ${why}`, "gateway_unavailable", null));
        }, deadline),
      };
      calls.set(id, entry);
      if (label.signal) {
        entry.onAbort = () => {
          if (!calls.has(id)) return;
          finish(entry);
          if (entry.sent && socket?.readyState === WebSocket.OPEN) {
            socket.send(JSON.stringify({ v: 1, type: "cancel", id }));
          }
          reject(label.signal?.reason);
        };
        label.signal.addEventListener("abort", entry.onAbort, { once: true });
      }
      flush();
    });
  }

  return {
    async send(path, body, label) {
      if (label.auth === "enrollment" || overHttp) return http.send(path, body, label);
      await http.ensureCredentials();
      if (overHttp) return http.send(path, body, label);
      return call(path, body, label);
    },
    ensureCredentials: () => http.ensureCredentials(),
    currentId: () => http.currentId(),
    async close() {
      closed = true;
      clearInterval(ping);
      socket?.close(1000, "agent stopping");
      socket = null;
    },
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
