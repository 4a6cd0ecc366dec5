import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * What a client of `POST /v1/batches` relies on to match results to its items: the
 * batch's jobs listed in the items' order, and a batch that holds only its own jobs. No
 * agent runs, so every job stays queued while a test looks.
 */

type Page = { data: { id: string; input: { n?: number } }[]; next_cursor: string | null };

describe("batch items", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ models: ["noop"] });
  }, 60_000);
  afterAll(() => gw?.close());

  const post = (path: string, json: unknown, headers: Record<string, string> = {}) =>
    gw.api(path, { method: "POST", json, headers });

  async function batchJobs(id: string): Promise<Page["data"]> {
    const jobs: Page["data"] = [];
    let cursor: string | null = null;
    do {
      const after: string = cursor ? `&cursor=${cursor}` : "";
      const page = (await (
        await gw.api(`/v1/batches/${id}/jobs?limit=100${after}`)
      ).json()) as Page;
      jobs.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor);
    return jobs;
  }

  it("lists a batch's jobs in the order of its items, bad items left out", async () => {
    // Made in the same millisecond, the jobs' ids once sorted by their random part.
    const items = Array.from({ length: 300 }, (_, n) =>
      n % 7 === 3 ? { input: { delay_ms: -1 } } : { input: { n, delay_ms: 60_000 } },
    );
    const response = await post("/v1/batches", { model: "noop", items });
    expect(response.status).toBe(202);
    const batch = (await response.json()) as { id: string; errors: unknown[] };
    const good = items.flatMap((item) => (item.input.n === undefined ? [] : [item.input.n]));
    expect(batch.errors).toHaveLength(items.length - good.length);
    const jobs = await batchJobs(batch.id);
    expect(jobs.map((job) => job.input.n)).toEqual(good);
  });

  it("makes each item of a keyed batch its own job, whatever keys single jobs were sent with", async () => {
    // A client's own scheme: `order-7#0` for a single job, `order-7` for a batch.
    const key = `order-${Date.now()}`;
    const input = { n: 0, delay_ms: 60_000 };
    const single = await post(
      "/v1/jobs",
      { model: "noop", input },
      { "idempotency-key": `${key}#0` },
    );
    expect(single.status).toBe(202);
    const singleId = ((await single.json()) as { id: string }).id;
    const items = [{ input }, { input: { n: 1, delay_ms: 60_000 } }];
    const response = await post(
      "/v1/batches",
      { model: "noop", items },
      { "idempotency-key": key },
    );
    expect(response.status).toBe(202);
    const batch = (await response.json()) as {
      id: string;
      request_counts: { total: number; queued: number };
      errors: unknown[];
    };
    expect(batch.errors).toEqual([]);
    expect(batch.request_counts).toMatchObject({ total: 2, queued: 2 });
    const jobs = await batchJobs(batch.id);
    expect(jobs.map((job) => job.input.n)).toEqual([0, 1]);
    expect(jobs.map((job) => job.id)).not.toContain(singleId);
  });

  it("leaves a completed batch completed when it is canceled, with no canceled_at", async () => {
    const response = await post("/v1/batches", { model: "noop", items: [{ input: {} }] });
    const { id } = (await response.json()) as { id: string };
    const [job] = await batchJobs(id);
    // Its one job canceled on its own: the batch completes (its jobs ended, none by it).
    expect((await post(`/v1/jobs/${job?.id}/cancel`, {})).status).toBe(200);
    const read = async () =>
      (await (await gw.api(`/v1/batches/${id}`)).json()) as {
        status: string;
        canceled_at: string | null;
      };
    await expect.poll(async () => (await read()).status).toBe("completed");
    const canceled = await post(`/v1/batches/${id}/cancel`, {});
    expect(canceled.status).toBe(200);
    const ended = { status: "completed", canceled_at: null };
    expect(await canceled.json()).toMatchObject(ended);
    expect(await read()).toMatchObject(ended);
  });

  it("takes 1 000 items of URLs and metadata, past a single job's 64 KiB body", async () => {
    const items = Array.from({ length: 1_000 }, (_, n) => ({
      input: { image: `https://images.example.com/scans/2026/12/page-${n}.png`, delay_ms: 60_000 },
      metadata: { customer: "acme", page: String(n) },
    }));
    const body = JSON.stringify({ model: "noop", items });
    expect(body.length).toBeGreaterThan(64 * 1024);
    const response = await gw.api("/v1/batches", {
      method: "POST",
      body,
      headers: { "content-type": "application/json" },
    });
    expect(response.status).toBe(202);
    expect(await response.json()).toMatchObject({ request_counts: { total: 1_000 } });
    // Above the batches' own limit: a 413 that says what to do.
    const huge = JSON.stringify({ model: "noop", items, metadata: { pad: "x".repeat(500) } });
    const padded = huge.replace('"items":[', `"items":[${'{"input":{}},'.repeat(100_000)}`);
    const refused = await gw.api("/v1/batches", {
      method: "POST",
      body: padded,
      headers: { "content-type": "application/json" },
    });
    expect(refused.status).toBe(413);
    expect(await refused.json()).toMatchObject({
      code: "body_too_large",
      detail: expect.stringMatching(/batch.*at most 1048576 bytes/),
    });
  });

  it("refuses a batch to a paused model as a submit is (503, Retry-After), and takes it once resumed", async () => {
    const paused = await post("/v1/admin/models/noop/pause", { reject_new: true });
    expect(paused.status).toBe(200);
    const key = `paused-${Date.now()}`;
    const items = [{ input: { n: 0 } }, { input: { n: 1 } }];
    const send = () => post("/v1/batches", { model: "noop", items }, { "idempotency-key": key });
    try {
      const refused = await send();
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(await refused.json()).toMatchObject({ code: "model_paused" });
    } finally {
      expect((await post("/v1/admin/models/noop/resume", {})).status).toBe(200);
    }
    // The same request again, as the client was told to: made now, not refused for good.
    const again = await send();
    expect(again.status).toBe(202);
    expect(await again.json()).toMatchObject({ request_counts: { total: 2 }, errors: [] });
  });

  it("says what a metadata key must be, for an item, a batch and a job", async () => {
    const rule = "not a valid key: letters, digits, '_', '.' or '-' (1-64)";
    const bad = { "bad key": "v" };
    const items = [{ input: {}, metadata: bad }, { input: {} }];
    const made = await post("/v1/batches", { model: "noop", items });
    expect(await made.json()).toMatchObject({
      errors: [{ index: 0, message: `metadata.bad key: ${rule}` }],
    });
    const batch = await post("/v1/batches", { model: "noop", items, metadata: bad });
    expect(await batch.json()).toMatchObject({ detail: `body: metadata.bad key: ${rule}` });
    const job = await post("/v1/jobs", { model: "noop", input: {}, metadata: bad });
    expect(await job.json()).toMatchObject({
      errors: [{ path: "metadata.bad key", message: rule }],
    });
  });

  it("opens a completed batch again while a retried job of its runs, and completes it after", async () => {
    const response = await post("/v1/batches", { model: "noop", items: [{ input: {} }] });
    const { id } = (await response.json()) as { id: string };
    const [job] = await batchJobs(id);
    const read = async () =>
      (await (await gw.api(`/v1/batches/${id}`)).json()) as {
        status: string;
        completed_at: string | null;
        request_counts: { queued: number };
      };
    expect((await post(`/v1/jobs/${job?.id}/cancel`, {})).status).toBe(200);
    await expect.poll(async () => (await read()).status).toBe("completed");
    expect((await post(`/v1/jobs/${job?.id}/retry`, {})).status).toBe(202);
    // Not `completed` with a job queued: in progress until that job ends again.
    expect(await read()).toMatchObject({
      status: "in_progress",
      completed_at: null,
      request_counts: { queued: 1 },
    });
    expect((await post(`/v1/jobs/${job?.id}/cancel`, {})).status).toBe(200);
    await expect.poll(async () => (await read()).status).toBe("completed");
  });

  it("names only the type of a field sent as the wrong type, not its length too", async () => {
    const refused = await post("/v1/batches", { model: "noop", items: "" });
    expect(refused.status).toBe(422);
    expect(((await refused.json()) as { errors: unknown[] }).errors).toEqual([
      { path: "items", message: "must be an array, not a string" },
    ]);
  });
});
