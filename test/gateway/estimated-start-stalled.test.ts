import { afterAll, beforeAll, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import type { Job } from "../../shared/protocol/index.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A queued job's `estimated_start_at` comes from its model's recent pace. While nothing can
 * start it (the model paused, or no live agent serving it) that pace says nothing of when it
 * will: the job showed an estimate of "now" (or a moment ago, on every poll) beside
 * `waiting_reason: model_paused` or `no_agent_for_model`. It is null then, as it is without a
 * pace, and comes back once the job can start.
 */
let gw: TestGateway;
let agent: AgentHandle | null = null;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"] });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

const submit = async (): Promise<Job> =>
  (await (
    await gw.api("/v1/jobs", { method: "POST", json: { model: "noop", input: {} } })
  ).json()) as Job;
const get = async (id: string): Promise<Job> =>
  (await (await gw.api(`/v1/jobs/${id}`)).json()) as Job;
const admin = (path: string, json: unknown = {}) => gw.api(path, { method: "POST", json });

it("is null while the model is paused or no live agent serves it", {
  timeout: 60_000,
}, async () => {
  // A pace: a few starts in the last minutes.
  for (let i = 0; i < 3; i++) {
    const { id } = await submit();
    await expect.poll(async () => (await get(id)).status, { timeout: 10_000 }).toBe("succeeded");
  }

  expect((await admin("/v1/admin/models/noop/pause")).status).toBe(200);
  const paused = await submit();
  const whilePaused = await get(paused.id);
  expect(whilePaused).toMatchObject({ status: "queued", waiting_reason: "model_paused" });
  expect(whilePaused.estimated_start_at).toBeNull();

  await agent?.stop();
  agent = null;
  expect((await admin("/v1/admin/models/noop/resume")).status).toBe(200);
  // The stopped agent is gone: agents_unhealthy (no_agent_for_model once it is forgotten).
  await expect
    .poll(async () => (await get(paused.id)).waiting_reason, { timeout: 10_000 })
    .toBe("agents_unhealthy");
  expect((await get(paused.id)).estimated_start_at).toBeNull();
});
