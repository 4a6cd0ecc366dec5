/**
 * Job progress on the Workers entry, in workerd through Miniflare (D1): the heartbeat stores
 * it (migration 0015 on D1), the job shows it, and the job's event stream, which re-reads D1
 * on its own timer there, sends it before the end.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readSse } from "../helpers/sse.ts";
import { type NoopWorker, startNoopWorker } from "../helpers/workerd-noop.ts";

let worker: NoopWorker;
beforeAll(async () => {
  worker = await startNoopWorker();
});
afterAll(() => worker?.close());

describe("job progress in workerd", () => {
  it("stores a heartbeat's progress, shows it on the job and streams it before the end", async () => {
    const { api, signed } = worker;
    const credentials = await worker.agent("workerd-progress");
    const agent_id = credentials.agent_id;
    const submitted = await api("/v1/jobs", { method: "POST", json: { model: "noop", input: {} } });
    const { id } = (await submitted.json()) as { id: string };
    expect(
      (await signed(credentials, `/jobs/${id}/claim`, { v: 1, agent_id, attempt: 1 })).status,
    ).toBe(200);
    const progress = { fraction: 0.5, stage: "recognition", message: "3 of 6 lines" };
    const beat = { v: 1, agent_id, attempt: 1, progress };
    expect((await signed(credentials, `/jobs/${id}/heartbeat`, beat)).status).toBe(200);
    const job = (await (await api(`/v1/jobs/${id}`)).json()) as { progress: unknown };
    expect(job.progress).toMatchObject(progress);

    const stream = await api(`/v1/jobs/${id}/events`);
    expect(stream.status).toBe(200);
    const events: { event: string; data: { status?: string; stage?: string } }[] = [];
    let reported = false;
    await readSse(stream as unknown as Response, ({ event, data }) => {
      events.push({ event, data: JSON.parse(data) });
      // The agent finishes once the stream has shown the progress.
      if (event === "progress" && !reported) {
        reported = true;
        const done = { v: 1, type: "succeeded", agent_id, attempt: 1, output: {} };
        void signed(credentials, `/jobs/${id}/events`, done);
      }
    });
    expect(events.map((e) => e.data.status ?? e.event)).toEqual([
      "queued",
      "running",
      "progress",
      "succeeded",
    ]);
  });
});
