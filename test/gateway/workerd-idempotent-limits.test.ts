/**
 * Copies of one keyed POST /v1/jobs sent at once on the Workers entry (workerd through
 * Miniflare, D1), with one free place under the tenant's max_queued_jobs: each gets the one
 * job (docs/api.md, "whatever the limits"). Workers take no turns (key-turns.ts): a copy a
 * limit refused looks its key up again.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { type NoopWorker, startNoopWorker } from "../helpers/workerd-noop.ts";

let worker: NoopWorker;
beforeAll(async () => {
  worker = await startNoopWorker();
}, 60_000);
afterAll(() => worker?.close());

it("answers every copy of a keyed submit with its one job at the last free place", async () => {
  const made = await worker.api("/v1/admin/tenants", {
    method: "POST",
    json: { id: "ten_keyed", name: "keyed", plan: "free", limits: { max_queued_jobs: 1 } },
  });
  expect(made.status).toBe(201);
  const keyAnswer = await worker.api("/v1/admin/tenants/ten_keyed/keys", {
    method: "POST",
    json: {},
  });
  const key = ((await keyAnswer.json()) as { key: string }).key;
  const headers = { authorization: `Bearer ${key}`, "idempotency-key": "same" };
  const answers = await Promise.all(
    Array.from({ length: 10 }, () =>
      worker.api("/v1/jobs", { method: "POST", headers, json: { model: "noop", input: {} } }),
    ),
  );
  const bodies = await Promise.all(
    answers.map((answer) => answer.json() as Promise<{ id?: string }>),
  );
  expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(202));
  expect(new Set(bodies.map((body) => body.id)).size).toBe(1);
}, 60_000);
