/**
 * An in-process gateway per test (a clock the test moves) for the agent-trust tests, with
 * an operator tenant, a fetcher into it, hand-signed agents enrolled on it, and the checks
 * on what it refuses. `gw`, `adminKey` and `fetcher` are live bindings, set by the hooks
 * `useTrustGateway` registers; real agents pushed to `agents` are stopped after each test.
 */
import { afterEach, beforeEach, expect } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { type InProcessGateway, problemOf, startInProcessGateway } from "./in-process-gateway.ts";
import { enrollHandAgent, type Fetcher, type HandAgent } from "./signed-agent.ts";

export const ORIGIN = "http://gantry.test";
export let gw: InProcessGateway;
export let adminKey: string;
export let fetcher: Fetcher;
export const agents: AgentHandle[] = [];

/** A fresh gateway before each test of the file, closed (and its agents stopped) after. */
export function useTrustGateway(): void {
  beforeEach(async () => {
    gw = await startInProcessGateway();
    adminKey = await gw.addTenant({ id: "ten_ops" });
    fetcher = async (url, init) => gw.app.request(url, init);
  });

  afterEach(async () => {
    await Promise.all(agents.splice(0).map((agent) => agent.stop()));
    await gw.close();
  });
}

export const enroll = (name?: string) =>
  enrollHandAgent(ORIGIN, gw.gateway.config.agentToken, { fetcher, ...(name ? { name } : {}) });

export async function submitNoop(): Promise<string> {
  const response = await gw.request("/v1/jobs", {
    method: "POST",
    key: adminKey,
    json: { model: "noop", input: {} },
  });
  expect(response.status).toBe(202);
  return ((await response.json()) as { id: string }).id;
}

export async function expectRefused(response: Response, status: number, code: string) {
  expect(response.status).toBe(status);
  const problem = await problemOf(response);
  expect(problem.code).toBe(code);
  return problem;
}

export const claim = (agent: HandAgent, jobId: string, attempt = 1) =>
  agent.post(`/jobs/${jobId}/claim`, { v: 1, agent_id: agent.agentId, attempt });
