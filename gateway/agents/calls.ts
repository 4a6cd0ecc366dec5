import { Hono } from "hono";
import { TrieRouter } from "hono/router/trie-router";
import type { z } from "zod";
import type { Gateway } from "../context.ts";
import { bodyTooLarge } from "../http/json-body.ts";
import { logFailure, problemFor } from "../http/problem.ts";
import { parseWith, readJsonBody } from "../http/validation.ts";
import type { AgentRow } from "../store/agents.ts";
import { type AgentEnv, requireSignedAgent } from "./middleware.ts";

/** What an agent call runs with, however it came: a signed request or a session message. */
export interface CallScope {
  gateway: Gateway;
  agent: AgentRow;
  /** The path's parameters (`:id`). */
  param(name: string): string;
  /** Aborted when the caller goes away (a waiting take stops waiting). */
  signal(): AbortSignal;
}

/**
 * One call of the internal agent API: a POST route under /internal/v1, its body's schema,
 * and what it does. Each is served twice from this one definition: as a signed HTTP route
 * (`callRoutes`) and as a call on an agent session (`callFinder`, runtime/node/sessions.ts),
 * so both transports validate and answer alike.
 */
export interface AgentCall {
  /** Relative to /internal/v1, as a Hono pattern. */
  readonly path: string;
  handle(scope: CallScope, body: unknown): Promise<unknown>;
}

export function agentCall<S extends z.ZodType>(
  path: string,
  schema: S,
  run: (scope: CallScope, input: z.infer<S>) => Promise<unknown> | unknown,
): AgentCall {
  return { path, handle: async (scope, body) => run(scope, parseWith(schema, body, "body")) };
}

/** The calls as signed POST routes, to mount at /internal/v1. */
export function callRoutes(calls: AgentCall[]): Hono<AgentEnv> {
  const routes = new Hono<AgentEnv>();
  for (const call of calls) {
    routes.post(call.path, requireSignedAgent, async (c) => {
      const scope: CallScope = {
        gateway: c.get("gateway"),
        agent: c.get("agent"),
        param: (name) => c.req.param(name) ?? "",
        // Lazily: on Node the Web Request behind `raw` is built on first use, and only a
        // take waits.
        signal: () => c.req.raw.signal,
      };
      return c.json(await call.handle(scope, await readJsonBody(c)));
    });
  }
  return routes;
}

export interface FoundCall {
  call: AgentCall;
  params: Record<string, string>;
}

/**
 * The call a session message names by its full path (`/internal/v1/jobs/j_1/claim`), with
 * its parameters; null for any other path. A session dispatches these itself: through the
 * app each was a Web Request, a pass through its middleware and a Response, a fifth of the
 * gateway's CPU at 200 jobs/s (issue 29).
 */
export function callFinder(prefix: string, calls: AgentCall[]): (path: string) => FoundCall | null {
  const router = new TrieRouter<AgentCall>();
  for (const call of calls) router.add("POST", prefix + call.path, call);
  return (path) => {
    const [matches] = router.match("POST", path);
    const first = matches[0];
    if (!first) return null;
    const [call, params] = first;
    return { call, params: params as Record<string, string> };
  };
}

/** A call made without a request (a session message, an in-process agent's call). */
export interface DirectCall {
  gateway: Gateway;
  /** Its agent, looked up as `requireSignedAgent` does for a session (revocation shows). */
  agent: () => Promise<AgentRow>;
  /** The full path, for the problem's `instance`. */
  path: string;
  body: unknown;
  /** Whether the body is over `maxBytes` (as sent: a call has no bytes of its own). */
  bodyOver(maxBytes: number): boolean;
  signal: AbortSignal;
}

/** A direct call's answer: its route's status, JSON body and headers (a problem's). */
export interface DirectAnswer {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

/**
 * The answer `found` gives a direct call, as its route answers a signed request: the same
 * checks in the same order (the body's size, the agent, the body's schema), 200 and the
 * result, or the error's problem+json and status.
 */
export async function answerDirect(found: FoundCall, direct: DirectCall): Promise<DirectAnswer> {
  const { gateway, path } = direct;
  try {
    const maxBytes = gateway.config.maxBodyBytes;
    if (direct.bodyOver(maxBytes)) throw bodyTooLarge(maxBytes);
    const scope: CallScope = {
      gateway,
      agent: await direct.agent(),
      param: (name) => found.params[name] ?? "",
      signal: () => direct.signal,
    };
    return { status: 200, body: await found.call.handle(scope, direct.body), headers: {} };
  } catch (error) {
    const problem = problemFor(error, path);
    logFailure(gateway.log, error, problem, path);
    return { status: problem.status, body: problem.body, headers: problem.headers };
  }
}
