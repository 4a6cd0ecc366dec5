import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { signAgentRequest } from "../../shared/agent-signing.ts";
import { AGENT_SESSION_PATH, SessionAnswer } from "../../shared/protocol/agent-session.ts";
import { enrollHandAgent, type HandAgent } from "../helpers/signed-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A session call is answered as its signed HTTP request is (gateway/agents/calls.ts): the
 * agent API's calls are dispatched by the session itself, anything else through the app, and
 * status and body match either way, refusals included.
 */
let gw: TestGateway;
let agent: HandAgent;
let socket: WebSocket;
const waiting = new Map<number, (answer: SessionAnswer) => void>();
let nextId = 0;

beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  agent = await enrollHandAgent(gw.url, gw.agentToken);
  expect((await agent.register(["noop"])).status).toBe(200);
  const headers = await signAgentRequest({
    agentId: agent.agentId,
    secret: agent.secret,
    method: "GET",
    url: AGENT_SESSION_PATH,
    body: "",
  });
  socket = new WebSocket(`${gw.url.replace(/^http/, "ws")}${AGENT_SESSION_PATH}`, { headers });
  socket.on("message", (data) => {
    const answer = SessionAnswer.parse(JSON.parse(String(data)));
    waiting.get(answer.id)?.(answer);
  });
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
});
afterAll(async () => {
  socket?.close();
  await gw?.close();
});

/** The call on the session: its status and body. */
function onSession(path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const id = nextId++;
  return new Promise((resolve) => {
    waiting.set(id, (answer) => resolve({ status: answer.status, body: answer.body }));
    socket.send(JSON.stringify({ v: 1, type: "call", id, path: `/internal/v1${path}`, body }));
  });
}

/** The same call as a signed request. */
async function overHttp(path: string, body: unknown) {
  const response = await agent.send(await agent.sign(path, body));
  return { status: response.status, body: await response.json() };
}

const heartbeat = () => ({
  v: 1,
  models: ["noop"],
  provider: "cpu",
  slots: 1,
  heartbeat_interval_seconds: 1,
});

const claim = (attempt: number) => ({ v: 1, agent_id: agent.agentId, attempt });
const cases: [string, string, () => unknown][] = [
  ["an agent heartbeat", "/agents/heartbeat", heartbeat],
  ["a claim of a job that does not exist", "/jobs/job_missing/claim", () => claim(1)],
  ["a claim with a bad body", "/jobs/job_missing/claim", () => ({ v: 1, attempt: 0 })],
  ["a batch of claims with none in it", "/jobs/claims", () => ({ v: 1, claims: [] })],
  ["a report with no body", "/jobs/job_missing/events", () => null],
  ["the queue's settings", "/queue/info", () => ({ v: 1 })],
  ["a path with dot segments", "/jobs/../claim", () => claim(1)],
  ["a route that does not exist", "/jobs/job_missing/nothing", () => ({ v: 1 })],
  ["a body over the limit", "/jobs/claims", () => ({ v: 1, pad: "x".repeat(70_000) })],
];

describe("agent session calls", () => {
  it.each(cases)("answers %s as the signed request is", async (_name, path, body) => {
    const http = await overHttp(path, body());
    expect(await onSession(path, body())).toEqual(http);
  });

  it("resolves dot segments as a URL would, as the signed request's path is", async () => {
    const answer = await onSession("/jobs/job_missing/../../agents/heartbeat", heartbeat());
    expect(answer).toEqual(await overHttp("/agents/heartbeat", heartbeat()));
    expect(answer.status).toBe(200);
  });

  it.each(cases)("answers %s in process as the signed request is", async (_name, path, body) => {
    const http = await agent.send(await agent.sign(path, body()));
    const inProcess = await gw.agentFetch(agent.agentId)(`${gw.url}/internal/v1${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body()),
    });
    expect(inProcess.status).toBe(http.status);
    expect(inProcess.headers.get("content-type")).toBe(http.headers.get("content-type"));
    expect(await inProcess.json()).toEqual(await http.json());
  });
});
