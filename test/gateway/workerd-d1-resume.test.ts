/**
 * D1 queries per Worker invocation (workerd-counted.ts) on resuming a paused model: its
 * waiting jobs, as many as its release window let out (here 100), are published again.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  type CountedWorker,
  D1_BOUND,
  numberedItems,
  startCountedWorker,
} from "../helpers/workerd-counted.ts";

let counting: CountedWorker;
beforeAll(async () => {
  counting = await startCountedWorker({ GANTRY_RELEASE_WINDOW: "100" });
}, 60_000);
afterAll(() => counting?.worker.close());

it("republishes a resumed model's released jobs in a bounded number of statements", async () => {
  const json = { model: "noop", items: numberedItems(300) };
  const made = await counting.counted("/v1/batches", { method: "POST", json });
  expect(made.status).toBe(202);
  const paused = await counting.counted("/v1/admin/models/noop/pause", {
    method: "POST",
    json: {},
  });
  expect(paused.status).toBe(200);
  const resumed = await counting.counted("/v1/admin/models/noop/resume", {
    method: "POST",
    json: {},
  });
  expect(resumed.status).toBe(200);
  // The window's jobs, released by the batch and unpublished by the pause's resume.
  expect(resumed.body).toMatchObject({ paused: false, republished: 100 });
  expect(resumed.statements, resumed.texts).toBeLessThanOrEqual(D1_BOUND);
}, 120_000);
