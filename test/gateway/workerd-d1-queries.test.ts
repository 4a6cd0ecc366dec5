/**
 * D1 queries per Worker invocation (workerd through Miniflare, its D1 counted by
 * d1-counting-entry.ts): Cloudflare allows 1 000 on the paid plan and 50 on the free one
 * (https://developers.cloudflare.com/d1/platform/limits/), so a route over many jobs must
 * make a number of statements that does not grow with them. Each statement of a `batch()`
 * is counted as one, as the limits page leaves open whether a batch counts once. The cron's
 * sweep is one invocation too.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  D1_BOUND as BOUND,
  type CountedWorker,
  numberedItems as items,
  startCountedWorker,
} from "../helpers/workerd-counted.ts";

type BatchAnswer = { id: string; request_counts: Record<string, number> };

let counting: CountedWorker;
beforeAll(async () => {
  counting = await startCountedWorker({ GANTRY_MAX_QUEUE_DEPTH: "100000" });
}, 60_000);
afterAll(() => counting?.worker.close());

const api: CountedWorker["worker"]["api"] = (...request) => counting.worker.api(...request);
const invocations = () => counting.invocations();
const makeBatch = (n: number) =>
  counting.counted("/v1/batches", { method: "POST", json: { model: "noop", items: items(n) } });
const makeBatchOf = async (json: object) => {
  const made = await api("/v1/batches", { method: "POST", json });
  expect(made.status).toBe(202);
  await invocations();
  return (await made.json()) as BatchAnswer;
};

/** Every job of the batch, through its listing: [id, input n, status]. */
async function batchJobs(id: string) {
  const jobs: { id: string; n: number; status: string }[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `&cursor=${cursor}` : "";
    const page = await api(`/v1/batches/${id}/jobs?limit=100${query}`);
    const body = (await page.json()) as {
      data: { id: string; status: string; input: { n: number } }[];
      next_cursor: string | null;
    };
    jobs.push(...body.data.map((job) => ({ id: job.id, n: job.input.n, status: job.status })));
    cursor = body.next_cursor;
  } while (cursor);
  await invocations();
  return jobs;
}

function expectEachOnce(jobs: { id: string; n: number }[], n: number) {
  expect(new Set(jobs.map((job) => job.id)).size).toBe(n);
  expect(jobs.map((job) => job.n).sort((a, b) => a - b)).toEqual(items(n).map((_, i) => i));
}

describe("D1 queries per invocation on Workers", () => {
  it("makes a 1 000-item batch in as many statements as a 10-item one", async () => {
    const small = await makeBatch(10);
    expect(small.status).toBe(202);
    const large = await makeBatch(1_000);
    expect(large.status).toBe(202);
    const made = large.body as BatchAnswer;
    expect(made.request_counts.total).toBe(1_000);
    expect(large.statements, large.texts).toBeLessThanOrEqual(BOUND);
    expect(large.statements).toBeLessThanOrEqual(small.statements + 5);
    const jobs = await batchJobs(made.id);
    expectEachOnce(jobs, 1_000);
  }, 120_000);

  it("makes a keyed 1 000-item batch in a bounded number of statements, once", async () => {
    const send = () =>
      counting.counted("/v1/batches", {
        method: "POST",
        json: { model: "noop", items: items(1_000) },
        headers: { "idempotency-key": "d1-queries-keyed" },
      });
    const first = await send();
    expect(first.status).toBe(202);
    expect(first.statements, first.texts).toBeLessThanOrEqual(BOUND);
    const again = await send();
    expect(again.status).toBe(202);
    const made = first.body as BatchAnswer;
    expect((again.body as BatchAnswer).id).toBe(made.id);
    expectEachOnce(await batchJobs(made.id), 1_000);
  }, 120_000);

  it("cancels a 1 000-item batch in a bounded number of statements", async () => {
    const made = (await makeBatch(1_000)).body as BatchAnswer;
    const canceled = await counting.counted(`/v1/batches/${made.id}/cancel`, {
      method: "POST",
      json: {},
    });
    expect(canceled.status).toBe(200);
    expect(canceled.statements, canceled.texts).toBeLessThanOrEqual(BOUND);
    const batch = canceled.body as BatchAnswer & { status: string };
    expect(batch.status).toBe("canceled");
    expect(batch.request_counts.canceled).toBe(1_000);
    const jobs = await batchJobs(made.id);
    expectEachOnce(jobs, 1_000);
    expect(new Set(jobs.map((job) => job.status))).toEqual(new Set(["canceled"]));
  }, 120_000);

  it("expires a sweep's worth of overdue jobs in a bounded number of statements", async () => {
    const made = await makeBatchOf({ model: "noop", ttl_seconds: 10, items: items(100) });
    // The shortest life a job may be given, and then some: every job is overdue after it.
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    await counting.worker.sweep();
    const [sweep, ...more] = await invocations();
    expect(more).toEqual([]);
    expect(sweep?.path).toBe("scheduled");
    expect(sweep?.statements, JSON.stringify(sweep?.texts)).toBeLessThanOrEqual(BOUND);
    const jobs = await batchJobs(made.id);
    expectEachOnce(jobs, 100);
    expect(new Set(jobs.map((job) => job.status))).toEqual(new Set(["expired"]));
  }, 120_000);

  it("purges 1 000 queued jobs in a bounded number of statements", async () => {
    const queued = async () => {
      const page = await api("/v1/jobs?status=queued&limit=100");
      const { data } = (await page.json()) as { data: unknown[] };
      await invocations();
      return data.length;
    };
    const purge = () =>
      counting.counted("/v1/admin/models/noop/purge", { method: "POST", json: { limit: 1_000 } });
    // The first test's jobs wait still.
    while (((await purge()).body as { next_cursor: string | null }).next_cursor);
    expect(await queued()).toBe(0);
    const made = (await makeBatch(1_000)).body as BatchAnswer;
    expect(await queued()).toBe(100);
    const purged = await purge();
    expect(purged.status).toBe(200);
    expect(purged.body).toMatchObject({ canceled: 1_000, next_cursor: null });
    expect(purged.statements, purged.texts).toBeLessThanOrEqual(BOUND);
    expect(await queued()).toBe(0);
    const jobs = await batchJobs(made.id);
    expectEachOnce(jobs, 1_000);
    expect(new Set(jobs.map((job) => job.status))).toEqual(new Set(["canceled"]));
  }, 120_000);
});
