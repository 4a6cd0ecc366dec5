import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { enrollHandAgent, type HandAgent } from "../helpers/signed-agent.ts";
import { readSse } from "../helpers/sse.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

interface JobBody {
  id: string;
  status: string;
  progress?: { fraction: number; stage: string; message: string | null } | null;
}

// An agent driven by hand: each report and each state change is the test's own.
describe.each(["sqlite", "postgres"] as const)("job progress at each state (%s)", (database) => {
  let gw: TestGateway;
  let agent: HandAgent;
  beforeAll(async () => {
    gw = await startTestGateway({ database, models: ["noop"] });
    agent = await enrollHandAgent(gw.url, gw.agentToken);
    expect((await agent.register(["noop"])).status).toBe(200);
  });
  afterAll(() => gw?.close());

  const job = async (id: string) => (await (await gw.api(`/v1/jobs/${id}`)).json()) as JobBody;
  const claimed = async () => {
    const response = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: {} },
    });
    const { id } = (await response.json()) as { id: string };
    const claim = await agent.post(`/jobs/${id}/claim`, {
      v: 1,
      agent_id: agent.agentId,
      attempt: 1,
    });
    expect(claim.status).toBe(200);
    return id;
  };
  const beat = (id: string, progress?: unknown) =>
    agent.post(`/jobs/${id}/heartbeat`, {
      v: 1,
      agent_id: agent.agentId,
      attempt: 1,
      ...(progress === undefined ? {} : { progress }),
    });

  it("stores the latest report; a succeeded job shows fraction 1 with its last stage", async () => {
    const id = await claimed();
    expect((await job(id)).progress).toBeNull();
    expect((await beat(id, { fraction: 0.25, stage: "detection" })).status).toBe(200);
    expect((await job(id)).progress).toMatchObject({
      fraction: 0.25,
      stage: "detection",
      message: null,
    });
    // A beat without progress keeps the last report.
    expect((await beat(id)).status).toBe(200);
    const report = { fraction: 0.5, stage: "recognition", message: "3 of 6 lines" };
    expect((await beat(id, report)).status).toBe(200);
    expect((await job(id)).progress).toMatchObject(report);
    const done = await agent.post(`/jobs/${id}/events`, {
      v: 1,
      type: "succeeded",
      agent_id: agent.agentId,
      attempt: 1,
      output: {},
    });
    expect(done.status).toBe(200);
    expect((await job(id)).progress).toMatchObject({ ...report, fraction: 1 });
    // The job ended: a late report is refused and changes nothing.
    expect((await beat(id, { fraction: 0.7, stage: "late" })).status).toBe(409);
    expect((await job(id)).progress?.stage).toBe("recognition");
  });

  it("a failed job keeps where it stopped; a retry clears it", async () => {
    const id = await claimed();
    expect((await beat(id, { fraction: 0.4, stage: "recognition" })).status).toBe(200);
    const failed = await agent.post(`/jobs/${id}/events`, {
      v: 1,
      type: "failed",
      agent_id: agent.agentId,
      attempt: 1,
      error: { type: "permanent", code: "bad_input", message: "no" },
      will_retry: false,
    });
    expect(failed.status).toBe(200);
    expect(await job(id)).toMatchObject({ status: "failed", progress: { fraction: 0.4 } });
    const retried = await gw.api(`/v1/jobs/${id}/retry`, { method: "POST" });
    expect(retried.status).toBe(202);
    const queued = await job(id);
    expect(queued.status).toBe("queued");
    expect(queued.progress ?? null).toBeNull();
  });

  it("a stream opened on a running job gets its latest report first, then the rest", async () => {
    const id = await claimed();
    expect((await beat(id, { fraction: 0.3, stage: "detection" })).status).toBe(200);
    const stream = await gw.api(`/v1/jobs/${id}/events`);
    const seen: string[] = [];
    await readSse(stream, ({ event, data }) => {
      const body = JSON.parse(data) as { status?: string; stage?: string };
      seen.push(body.status ?? `${event}:${body.stage}`);
      // Each step waits for the stream to show the one before.
      if (seen.length === 3) void beat(id, { fraction: 0.8, stage: "recognition" });
      if (seen.length === 4) {
        const done = { v: 1, type: "succeeded", agent_id: agent.agentId, attempt: 1, output: {} };
        void agent.post(`/jobs/${id}/events`, done);
      }
    });
    expect(seen).toEqual([
      "queued",
      "running",
      "progress:detection",
      "progress:recognition",
      "succeeded",
    ]);
  });

  it("refuses a malformed report with 422, never 500", async () => {
    const id = await claimed();
    for (const progress of [
      { fraction: 1.5, stage: "x" },
      { fraction: 0.5, stage: "" },
      { fraction: 0.5, stage: "x".repeat(65) },
      { fraction: 0.5, stage: "x", message: "m".repeat(257) },
      { fraction: "half", stage: "x" },
      { fraction: 0.5, stage: "x", extra: true },
    ]) {
      expect((await beat(id, progress)).status).toBe(422);
    }
    expect((await job(id)).progress).toBeNull();
  });
});
