import { afterAll, beforeAll, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * `GET /v1/admin/dead-letters?since=` and the redrive's `since` take a day as `GET /v1/usage`
 * takes `from` (`2026-12-07`, from its start, UTC), or an instant. A day was refused with
 * zod's "Invalid ISO datetime", though the usage routes beside them take one.
 */
let gw: TestGateway;
let agent: AgentHandle;
let failedId = "";
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"] });
  const made = await gw.api("/v1/jobs", {
    method: "POST",
    json: { model: "noop", input: { fail: "permanent" } },
  });
  failedId = ((await made.json()) as { id: string }).id;
  // Waited for by hand: expect.poll is for tests, not their setup.
  for (let tries = 0; tries < 100; tries++) {
    const job = (await (await gw.api(`/v1/jobs/${failedId}`)).json()) as { status: string };
    if (job.status === "failed") break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

const day = (offsetDays: number) =>
  new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);

it("lists dead letters since a day, as usage takes one", async () => {
  const today = await gw.api(`/v1/admin/dead-letters?since=${day(0)}`);
  expect(today.status).toBe(200);
  const listed = (await today.json()) as { data: { id: string }[] };
  expect(listed.data.map((job) => job.id)).toContain(failedId);
  const tomorrow = (await (await gw.api(`/v1/admin/dead-letters?since=${day(1)}`)).json()) as {
    data: unknown[];
  };
  expect(tomorrow.data).toEqual([]);
  const wrong = await gw.api("/v1/admin/dead-letters?since=yesterday");
  expect(wrong.status).toBe(422);
  expect(JSON.stringify(await wrong.json())).toContain(
    "must be a day (2026-12-01) or an ISO 8601 instant",
  );
});

it("redrives dead letters since a day", async () => {
  const redrive = await gw.api("/v1/admin/dead-letters/redrive", {
    method: "POST",
    json: { since: day(1) },
  });
  expect(redrive.status).toBe(200);
  expect(((await redrive.json()) as { redriven: string[] }).redriven).toEqual([]);
});
