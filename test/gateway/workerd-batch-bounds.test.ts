/**
 * Batch admission on the Workers entry (workerd through Miniflare, D1 and its `sql` queue): a
 * batch is admitted as a whole against the model's queue bound (GANTRY_MAX_QUEUE_DEPTH,
 * read by gateway/runtime/workers/settings.ts) and the tenant's queued-jobs bound, so the items
 * past the room are refused by index, or the whole batch with `atomic`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NoopWorker, startNoopWorker } from "../helpers/workerd-noop.ts";

type Made = {
  request_counts: { total: number };
  errors: { index: number; code: string }[];
};

let worker: NoopWorker;
beforeAll(async () => {
  worker = await startNoopWorker({ bindings: { GANTRY_MAX_QUEUE_DEPTH: "30" } });
}, 60_000);
afterAll(() => worker?.close());

const items = (n: number) => Array.from({ length: n }, (_, i) => ({ input: { n: i } }));
const batch = (json: unknown, key?: string) =>
  worker.api("/v1/batches", {
    method: "POST",
    json,
    ...(key ? { headers: { authorization: `Bearer ${key}` } } : {}),
  });
const queued = async (key?: string) => {
  const listed = await worker.api("/v1/jobs?status=queued&limit=100", {
    ...(key ? { headers: { authorization: `Bearer ${key}` } } : {}),
  });
  return ((await listed.json()) as { data: unknown[] }).data.length;
};

describe("batches against the bounds on Workers", () => {
  it("queues a tenant's batch up to its max_queued_jobs, refusing the rest by index", async () => {
    const made = await worker.api("/v1/admin/tenants", {
      method: "POST",
      json: {
        id: "ten_small",
        name: "small",
        plan: "free",
        limits: { max_queued_jobs: 8, rate_per_second: 1_000, burst: 1_000 },
      },
    });
    expect(made.status).toBe(201);
    const keyAnswer = await worker.api("/v1/admin/tenants/ten_small/keys", {
      method: "POST",
      json: {},
    });
    const key = ((await keyAnswer.json()) as { key: string }).key;
    const atomic = await batch({ model: "noop", items: items(9), atomic: true }, key);
    expect(atomic.status).toBe(429);
    expect(await queued(key)).toBe(0);
    const answer = await batch({ model: "noop", items: items(12) }, key);
    expect(answer.status).toBe(202);
    const body = (await answer.json()) as Made;
    expect(body.request_counts.total).toBe(8);
    expect(body.errors.map((error) => error.index)).toEqual([8, 9, 10, 11]);
    expect(new Set(body.errors.map((error) => error.code))).toEqual(
      new Set(["too_many_queued_jobs"]),
    );
    expect(await queued(key)).toBe(8);
  });
  it("queues up to GANTRY_MAX_QUEUE_DEPTH, from two batches sent together", async () => {
    // The 8 jobs of the test before wait in the same queue: 22 more fit.
    const answers = await Promise.all([
      batch({ model: "noop", items: items(20) }),
      batch({ model: "noop", items: items(20) }),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([202, 202]);
    const made = (await Promise.all(answers.map((answer) => answer.json()))) as Made[];
    expect(made[0]!.request_counts.total + made[1]!.request_counts.total).toBe(22);
    for (const one of made) {
      expect(one.errors).toHaveLength(20 - one.request_counts.total);
      expect(one.errors.every((error) => error.code === "queue_full")).toBe(true);
    }
    expect(await queued()).toBe(22);
    const full = await batch({ model: "noop", items: items(1) });
    expect(full.status).toBe(503);
    expect(((await full.json()) as { code: string }).code).toBe("queue_full");
  });
});
