import { answerDirect, callFinder, type DirectAnswer } from "../../agents/calls.ts";
import type { Gateway } from "../../context.ts";
import { AGENT_API_PREFIX, sessionCalls } from "../../routes/agent-calls.ts";
import type { AgentRow } from "../../store/agents.ts";

/**
 * The agent API's calls made without an HTTP request on the Node gateway: an agent
 * session's messages (sessions.ts) and the embedded agent's in-process calls.
 */

/** The agent API's calls by full path (agents/calls.ts). */
export const findCall = callFinder(AGENT_API_PREFIX, sessionCalls);

/**
 * A path with no dot segment, the same before and after URL parsing (a call's path has no
 * escapes: shared/protocol/agent-session.ts). Others go through the app, whose URL parsing
 * resolves them as it would a signed request's.
 */
export const plainPath = (path: string) => !/\/\.\.?(\/|$)/.test(path);

/** An in-process agent's calls by path and JSON text (NodeGateway.agentCalls). */
export type InProcessCalls = (
  path: string,
  text: string,
  signal?: AbortSignal,
) => Promise<DirectAnswer | null>;

/**
 * An in-process agent's call of the agent API by its path and JSON text, answered as a
 * session's call is (agents/calls.ts): the embedded default's agent makes two or three a
 * job. Null for a path that is no such call, or not plain (escapes, dot segments), and for
 * a body that is not JSON: the app answers those, as it would a signed request.
 */
export async function directCall(
  gateway: Gateway,
  agent: () => Promise<AgentRow>,
  path: string,
  text: string,
  signal: AbortSignal = new AbortController().signal,
): Promise<DirectAnswer | null> {
  const found = path.includes("%") || !plainPath(path) ? null : findCall(path);
  if (!found) return null;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return null;
  }
  const answer = await answerDirect(found, {
    gateway,
    agent,
    path,
    body,
    bodyOver: (maxBytes) => Buffer.byteLength(text) > maxBytes,
    signal,
  });
  // What the agent reads is what the wire would carry: JSON, nothing that only lives here.
  return { ...answer, body: JSON.parse(JSON.stringify(answer.body)) as unknown };
}

/**
 * An in-process agent's POST of JSON through `fetch` (tests, and agents given a fetch):
 * `directCall` in a Web Response. Null for anything else, which the app answers.
 */
export async function inProcessCall(
  gateway: Gateway,
  agent: () => Promise<AgentRow>,
  input: Parameters<typeof fetch>[0],
  init: RequestInit | undefined,
): Promise<Response | null> {
  if (typeof input !== "string" || init?.method !== "POST" || typeof init.body !== "string") {
    return null;
  }
  const headers = init.headers;
  const type =
    headers && !Array.isArray(headers) && !(headers instanceof Headers)
      ? headers["content-type"]
      : undefined;
  if (type !== "application/json") return null;
  // Parsed as the app would: dot segments resolved. An escaped path goes to the app, which
  // decodes its parameters.
  const path = new URL(input).pathname;
  const answer = await directCall(gateway, agent, path, init.body, init.signal ?? undefined);
  if (!answer) return null;
  const contentType = answer.status === 200 ? "application/json" : "application/problem+json";
  return new Response(JSON.stringify(answer.body), {
    status: answer.status,
    headers: { "content-type": contentType, ...answer.headers },
  });
}
