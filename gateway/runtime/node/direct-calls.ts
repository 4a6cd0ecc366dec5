import { answerDirect, callFinder } from "../../agents/calls.ts";
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

/**
 * An in-process agent's POST of JSON to a call of the agent API, answered as a session's
 * call is (agents/calls.ts) and not as a Web Request through the app: the embedded default's
 * agent makes two or three a job. Null for anything else, which the app answers.
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
  const found = path.includes("%") ? null : findCall(path);
  if (!found) return null;
  let body: unknown;
  try {
    body = JSON.parse(init.body);
  } catch {
    return null;
  }
  const text = init.body;
  const answer = await answerDirect(found, {
    gateway,
    agent,
    path,
    body,
    bodyOver: (maxBytes) => Buffer.byteLength(text) > maxBytes,
    signal: init.signal ?? new AbortController().signal,
  });
  const contentType = answer.status === 200 ? "application/json" : "application/problem+json";
  return new Response(JSON.stringify(answer.body), {
    status: answer.status,
    headers: { "content-type": contentType, ...answer.headers },
  });
}
