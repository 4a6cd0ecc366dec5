import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Gantry, type JobUpdate } from "../../client/index.ts";
import { twoGatewaysOnPostgres } from "../helpers/feed-client.ts";
import { startJobApi } from "../helpers/job-api-suite.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { readSse } from "../helpers/sse.ts";
import { type TestGateway, uploadFile } from "../helpers/test-gateway.ts";

type Api = TestGateway["api"];
interface Streamed {
  event: string;
  id: string;
  data: { status?: string; stage?: string; fraction?: number; attempt?: number; job_id?: string };
}
interface JobBody {
  id: string;
  status: string;
  progress?: { fraction: number; stage: string; message: string | null; updated_at: string };
}

/** Follows a job's event stream to its end; `onEvent` sees each event as it comes. */
async function streamJob(api: Api, id: string, onEvent?: (event: Streamed) => void) {
  const response = await api(`/v1/jobs/${id}/events`);
  expect(response.status).toBe(200);
  const events: Streamed[] = [];
  await readSse(response, ({ event, id: eventId, data }) => {
    const streamed = { event, id: eventId, data: JSON.parse(data) as Streamed["data"] };
    events.push(streamed);
    onEvent?.(streamed);
  });
  return events;
}

async function submit(api: Api, json: unknown): Promise<string> {
  const response = await api("/v1/jobs", { method: "POST", json });
  expect(response.status).toBe(202);
  return ((await response.json()) as { id: string }).id;
}

/**
 * Opens `GET /v1/events` (with `query`), runs `onOpen`, and collects every event until
 * `jobId` succeeded; the SSE `ready` event is left out.
 */
async function feedUntilDone(api: Api, query: string, onOpen: () => Promise<string>) {
  const abort = new AbortController();
  const response = await api(`/v1/events${query}`, { signal: abort.signal });
  expect(response.status).toBe(200);
  const events: Streamed[] = [];
  const jobId = await onOpen();
  try {
    await readSse(response, ({ event, id, data }) => {
      if (event !== "status" && event !== "progress") return;
      const streamed = { event, id, data: JSON.parse(data) as Streamed["data"] };
      if (streamed.data.job_id !== jobId) return;
      events.push(streamed);
      if (streamed.data.status === "succeeded") abort.abort();
    });
  } catch (error) {
    if (!abort.signal.aborted) throw error;
  }
  return events;
}

/** Progress events come only between `running` and the end, and never carry an SSE id. */
function expectProgressBeforeEnd(events: readonly Streamed[]) {
  const statuses = events.filter((e) => e.event === "status").map((e) => e.data.status);
  expect(statuses).toEqual(["queued", "running", "succeeded"]);
  const running = events.findIndex((e) => e.data.status === "running");
  const end = events.findIndex((e) => e.data.status === "succeeded");
  const progress = events.filter((e) => e.event === "progress");
  expect(progress.length).toBeGreaterThan(0);
  for (const event of progress) {
    const at = events.indexOf(event);
    expect(at).toBeGreaterThan(running);
    expect(at).toBeLessThan(end);
    expect(event.id).toBe("");
  }
  const fractions = progress.map((e) => e.data.fraction ?? -1);
  expect(fractions).toEqual([...fractions].sort((x, y) => x - y));
  return progress;
}

describe.each([
  { label: "SQLite, sql queue", database: "sqlite", queue: "sql" },
  { label: "Postgres, RabbitMQ", database: "postgres", queue: "amqp" },
] as const)("job progress ($label)", (setting) => {
  let ctx: Awaited<ReturnType<typeof startJobApi>>;
  beforeAll(async () => {
    ctx = await startJobApi(setting, "progress");
  });
  afterAll(() => ctx?.close());

  it("streams OCR's detection then recognition progress, in order, before succeeded", async () => {
    const png = await renderTextPng(["Invoice 4721", "total 98 dollars", "due in 30 days"]);
    const image = await uploadFile(ctx.gw, png, "image/png");
    const id = await submit(ctx.gw.api, { model: "ocr", input: { image } });
    const events = await streamJob(ctx.gw.api, id);
    const progress = expectProgressBeforeEnd(events);
    const stages = progress.map((e) => e.data.stage);
    expect(stages[0]).toBe("detection");
    expect(stages.at(-1)).toBe("recognition");
    // Never back from recognition to detection.
    expect(stages.lastIndexOf("detection")).toBeLessThan(stages.indexOf("recognition"));
    expect(progress.at(-1)?.data.fraction).toBe(1);
    const job = (await (await ctx.gw.api(`/v1/jobs/${id}`)).json()) as JobBody;
    expect(job.status).toBe("succeeded");
    expect(job.progress).toMatchObject({ fraction: 1, stage: "recognition" });
  });

  it("shows a noop job's progress on GET /v1/jobs/{id} while it runs", async () => {
    const id = await submit(ctx.gw.api, {
      model: "noop",
      input: { delay_ms: 1_500, progress_every_ms: 50 },
    });
    let seen: JobBody | null = null;
    const events = await streamJob(ctx.gw.api, id, (event) => {
      // Read the job once, at the first progress event the stream brings.
      if (event.event === "progress" && !seen) {
        seen = {} as JobBody;
        void ctx.gw
          .api(`/v1/jobs/${id}`)
          .then((r) => r.json())
          .then((body) => {
            seen = body as JobBody;
          });
      }
    });
    expectProgressBeforeEnd(events);
    const running = seen as JobBody | null;
    expect(running?.status).toBe("running");
    expect(running?.progress?.stage).toBe("sleeping");
    expect(running?.progress?.fraction).toBeGreaterThanOrEqual(0);
    expect(running?.progress?.fraction).toBeLessThan(1);
    const done = (await (await ctx.gw.api(`/v1/jobs/${id}`)).json()) as JobBody;
    expect(done.progress).toMatchObject({ fraction: 1, stage: "sleeping" });
  });

  it("GET /v1/events carries progress beside the status events, without ids", async () => {
    const input = { delay_ms: 600, progress_every_ms: 50 };
    const events = await feedUntilDone(ctx.gw.api, "?model=noop", () =>
      submit(ctx.gw.api, { model: "noop", input }),
    );
    const progress = expectProgressBeforeEnd(events);
    expect(progress.every((e) => e.data.stage === "sleeping")).toBe(true);
    expect(events.filter((e) => e.event === "status").every((e) => e.id !== "")).toBe(true);
    // A stream that keeps only ends keeps no progress.
    const ends = await feedUntilDone(ctx.gw.api, "?status=succeeded", () =>
      submit(ctx.gw.api, { model: "noop", input }),
    );
    expect(ends.map((e) => e.event)).toEqual(["status"]);
  });

  it("the SDK yields progress from jobs.events() and hands it to run(…, { onProgress })", async () => {
    const gantry = new Gantry({ baseUrl: ctx.gw.url, apiKey: ctx.gw.apiKey });
    const updates: JobUpdate[] = [];
    const input = { delay_ms: 600, progress_every_ms: 50 };
    await gantry.run("noop", input, { onProgress: (update) => updates.push(update) });
    const reported = updates.filter((u) => u.progress !== undefined);
    expect(reported.length).toBeGreaterThan(0);
    expect(reported.every((u) => u.status === "running" && u.stage === "sleeping")).toBe(true);
    expect(updates.at(-1)?.status).toBe("succeeded");

    const job = await gantry.jobs.create({ model: "noop", input });
    const types: string[] = [];
    for await (const event of gantry.jobs.events(job.id)) {
      types.push(event.type);
      if (event.type === "progress")
        expect(event.data).toMatchObject({ job_id: job.id, stage: "sleeping" });
    }
    expect(types).toContain("progress");
    expect(types.at(-1)).toBe("status");
  });

  it("has no progress on a job whose model reports none", async () => {
    const id = await submit(ctx.gw.api, { model: "noop", input: {} });
    const events = await streamJob(ctx.gw.api, id);
    expect(events.filter((e) => e.event === "progress")).toEqual([]);
    const job = (await (await ctx.gw.api(`/v1/jobs/${id}`)).json()) as JobBody;
    expect(job.progress).toBeNull();
  });

  it("refuses a progress_every_ms under 10 ms (422)", async () => {
    const response = await ctx.gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { progress_every_ms: 1 } },
    });
    expect(response.status).toBe(422);
  });
});

describe("job progress across two gateways on Postgres", () => {
  // The agent heartbeats to B only: A hears of progress through the database alone.
  const { pair } = twoGatewaysOnPostgres();

  it("a stream on A sees the progress an agent reported through B", async () => {
    const id = await submit(pair.a.api, {
      model: "noop",
      input: { delay_ms: 1_000, progress_every_ms: 100 },
    });
    const events = await streamJob(pair.a.api, id);
    const progress = expectProgressBeforeEnd(events);
    expect(progress.every((e) => e.data.stage === "sleeping" && e.data.job_id === id)).toBe(true);
  });

  it("GET /v1/events on A carries the progress reported through B", async () => {
    const events = await feedUntilDone(pair.a.api, "", () =>
      submit(pair.a.api, { model: "noop", input: { delay_ms: 600, progress_every_ms: 50 } }),
    );
    expectProgressBeforeEnd(events);
  });
});
