/**
 * D1 queries per Worker invocation (workerd through Miniflare, its D1 counted by
 * d1-counting-entry.ts): Cloudflare allows 1 000 on the paid plan and 50 on the free one
 * (https://developers.cloudflare.com/d1/platform/limits/), so a route over many jobs must
 * make a number of statements that does not grow with them. Each statement of a `batch()`
 * is counted as one, as the limits page leaves open whether a batch counts once. The cron's
 * sweep is one invocation too.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NoopWorker, startNoopWorker } from "../helpers/workerd-noop.ts";

/** The free plan's 50, less room for the first request's migration check and such. */
const BOUND = 40;

type Invocation = { path: string; statements: number; texts: Record<string, number> };
type BatchAnswer = { id: string; request_counts: Record<string, number> };

let worker: NoopWorker;
beforeAll(async () => {
  worker = await startNoopWorker({
    entry: "test/helpers/d1-counting-entry.ts",
    bindings: { GANTRY_MAX_QUEUE_DEPTH: "100000" },
  });
  // The first request migrates the database: not what this test measures.
  await worker.api("/v1/jobs?limit=1");
  await invocations();
}, 60_000);
afterAll(() => worker?.close());

/** The invocations since the last call, once their background work is done. */
async function invocations(): Promise<Invocation[]> {
  return (await (await worker.api("/__d1/invocations")).json()) as Invocation[];
}

/** The statements the one request `send` makes, with its answer. */
async function counted(send: () => Promise<Response>) {
  const answer = await send();
  const body = (await answer.json()) as unknown;
  const [only, ...more] = await invocations();
  expect(more).toEqual([]);
  return { status: answer.status, body, statements: only?.statements ?? 0, only };
}

const items = (n: number) => Array.from({ length: n }, (_, i) => ({ input: { n: i } }));
const makeBatch = (n: number) =>
  counted(
    () =>
      worker.api("/v1/batches", {
        method: "POST",
        json: { model: "noop", items: items(n) },
      }) as unknown as Promise<Response>,
  );
const makeBatchOf = async (json: object) => {
  const made = await worker.api("/v1/batches", { method: "POST", json });
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
    const page = await worker.api(`/v1/batches/${id}/jobs?limit=100${query}`);
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
    expect(large.statements, JSON.stringify(large.only?.texts)).toBeLessThanOrEqual(BOUND);
    expect(large.statements).toBeLessThanOrEqual(small.statements + 5);
    const jobs = await batchJobs(made.id);
    expectEachOnce(jobs, 1_000);
  }, 120_000);

  it("makes a keyed 1 000-item batch in a bounded number of statements, once", async () => {
    const send = () =>
      counted(
        () =>
          worker.api("/v1/batches", {
            method: "POST",
            json: { model: "noop", items: items(1_000) },
            headers: { "idempotency-key": "d1-queries-keyed" },
          }) as unknown as Promise<Response>,
      );
    const first = await send();
    expect(first.status).toBe(202);
    expect(first.statements, JSON.stringify(first.only?.texts)).toBeLessThanOrEqual(BOUND);
    const again = await send();
    expect(again.status).toBe(202);
    const made = first.body as BatchAnswer;
    expect((again.body as BatchAnswer).id).toBe(made.id);
    expectEachOnce(await batchJobs(made.id), 1_000);
  }, 120_000);

  it("cancels a 1 000-item batch in a bounded number of statements", async () => {
    const made = (await makeBatch(1_000)).body as BatchAnswer;
    const canceled = await counted(
      () =>
        worker.api(`/v1/batches/${made.id}/cancel`, {
          method: "POST",
          json: {},
        }) as unknown as Promise<Response>,
    );
    expect(canceled.status).toBe(200);
    expect(canceled.statements, JSON.stringify(canceled.only?.texts)).toBeLessThanOrEqual(BOUND);
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
    await worker.sweep();
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
      const page = await worker.api("/v1/jobs?status=queued&limit=100");
      const { data } = (await page.json()) as { data: unknown[] };
      await invocations();
      return data.length;
    };
    const purge = () =>
      counted(
        () =>
          worker.api("/v1/admin/models/noop/purge", {
            method: "POST",
            json: { limit: 1_000 },
          }) as unknown as Promise<Response>,
      );
    // The first test's jobs wait still.
    while (((await purge()).body as { next_cursor: string | null }).next_cursor);
    expect(await queued()).toBe(0);
    const made = (await makeBatch(1_000)).body as BatchAnswer;
    expect(await queued()).toBe(100);
    const purged = await purge();
    expect(purged.status).toBe(200);
    expect(purged.body).toMatchObject({ canceled: 1_000, next_cursor: null });
    expect(purged.statements, JSON.stringify(purged.only?.texts)).toBeLessThanOrEqual(BOUND);
    expect(await queued()).toBe(0);
    const jobs = await batchJobs(made.id);
    expectEachOnce(jobs, 1_000);
    expect(new Set(jobs.map((job) => job.status))).toEqual(new Set(["canceled"]));
  }, 120_000);
});
