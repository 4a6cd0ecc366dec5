import { afterEach, describe, expect, it } from "vitest";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

const opened: InProcessGateway[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((gw) => gw.close()));
});

async function open(config: Parameters<typeof startInProcessGateway>[0] = {}) {
  const gw = await startInProcessGateway(config);
  opened.push(gw);
  return gw;
}

/** Ten copies of one keyed request, sent at once. */
async function tenAtOnce(gw: InProcessGateway, key: string, path: string, json: unknown) {
  const answers = await Promise.all(
    Array.from({ length: 10 }, () =>
      gw.request(path, { method: "POST", key, headers: { "idempotency-key": "same" }, json }),
    ),
  );
  return Promise.all(
    answers.map(async (answer) => ({
      status: answer.status,
      body: (await answer.json()) as { id?: string; code?: string },
    })),
  );
}

// docs/api.md: "A retried request with the same Idempotency-Key gets its job back whatever
// the limits", and a keyed batch is answered "again, or twice at once".
describe("copies of one keyed request at one free place", () => {
  it("each get the one job, past the tenant's max_queued_jobs", async () => {
    const gw = await open();
    const key = await gw.addTenant({ id: "ten_one", plan: "free", limits: { max_queued_jobs: 1 } });
    const answers = await tenAtOnce(gw, key, "/v1/jobs", { model: "noop", input: {} });
    expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(202));
    expect(new Set(answers.map((answer) => answer.body.id)).size).toBe(1);
  });

  it("each get the one job, past the model's queue bound", async () => {
    const gw = await open({ queueBounds: { noop: 1 } });
    const key = await gw.addTenant({ id: "ten_bound", plan: "enterprise" });
    const answers = await tenAtOnce(gw, key, "/v1/jobs", { model: "noop", input: {} });
    expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(202));
    expect(new Set(answers.map((answer) => answer.body.id)).size).toBe(1);
  });

  it("each get the one batch, past the tenant's max_queued_jobs", async () => {
    const gw = await open();
    const key = await gw.addTenant({ id: "ten_bat", plan: "free", limits: { max_queued_jobs: 2 } });
    const batch = { model: "noop", items: [{ input: {} }, { input: {} }] };
    const answers = await tenAtOnce(gw, key, "/v1/batches", batch);
    expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(202));
    expect(new Set(answers.map((answer) => answer.body.id)).size).toBe(1);
    const jobs = await gw.request("/v1/jobs?limit=100", { key });
    expect(((await jobs.json()) as { data: unknown[] }).data).toHaveLength(2);
  });
});
