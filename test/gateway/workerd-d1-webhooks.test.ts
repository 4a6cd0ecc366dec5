/**
 * D1 queries per Worker invocation (workerd-counted.ts) for a purge of jobs that each
 * subscribed a webhook: their deliveries are recorded together, pending for the cron's
 * dispatcher, not recorded and attempted one job at a time by the purge's request.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { type CountedWorker, D1_BOUND, startCountedWorker } from "../helpers/workerd-counted.ts";

const JOBS = 200;

let counting: CountedWorker;
beforeAll(async () => {
  counting = await startCountedWorker({ GANTRY_MAX_QUEUE_DEPTH: "100000" });
}, 60_000);
afterAll(() => counting?.worker.close());

it("purges jobs with webhooks in a bounded number of statements, one delivery each", async () => {
  const { api } = counting.worker;
  const webhook = { url: "https://hooks.example.com/gantry" };
  const ids: string[] = [];
  for (let n = 0; n < JOBS; n++) {
    const made = await api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { n }, webhook },
    });
    expect(made.status).toBe(202);
    ids.push(((await made.json()) as { id: string }).id);
  }
  await counting.invocations();
  const purged = await counting.counted("/v1/admin/models/noop/purge", {
    method: "POST",
    json: { limit: 1_000 },
  });
  expect(purged.body).toMatchObject({ canceled: JOBS, next_cursor: null });
  expect(purged.statements, purged.texts).toBeLessThanOrEqual(D1_BOUND);
  for (const id of [ids[0], ids[JOBS - 1]]) {
    const listed = await api(`/v1/jobs/${id}/webhooks`);
    const { data } = (await listed.json()) as { data: { event_type: string; state: string }[] };
    expect(data).toMatchObject([{ event_type: "job.canceled", state: "pending" }]);
  }
}, 120_000);
