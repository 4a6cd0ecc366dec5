import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { freshPostgresUrl, startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * Two gateways on one Postgres, and one keyed request sent to each at once: the second
 * looks its key up before the first commits, then meets the limit the first one's job
 * filled. docs/api.md: the same key "gets its job back whatever the limits". The spy makes
 * that interleaving certain: the first request runs, whole, inside the second's look-up.
 */
const fresh = freshPostgresUrl("hl_keys");
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  a = await startTestGateway({ models: ["noop"], database: { url: fresh.url } });
  b = await startTestGateway({
    models: ["noop"],
    database: { url: fresh.url },
    // Every count read afresh: the copy here meets the limit the other gateway filled.
    config: { apiKeyCacheMs: 0, queueDepthCacheMs: 0 },
  });
  const patched = await a.api("/v1/admin/tenants/ten_test", {
    method: "PATCH",
    json: { limits: { max_queued_jobs: 1 } },
  });
  expect(patched.status).toBe(200);
});
afterAll(async () => {
  await b?.close();
  await a?.close();
  await dropPostgresSchema(fresh.url, fresh.schema);
});

/** A promise and what settles it (Node 20 has no Promise.withResolvers). */
function gate() {
  let resolve = () => {};
  const promise = new Promise<void>((settle) => {
    resolve = settle;
  });
  return { promise, resolve: () => resolve() };
}

const keyed = (gw: TestGateway, path: string, key: string, json: unknown) =>
  gw.api(path, { method: "POST", headers: { "idempotency-key": key }, json });

describe("a keyed request on two gateways at the last free place", () => {
  it("gets the job the other gateway made, not 429", async () => {
    const body = { model: "noop", input: {} };
    const jobs = b.gateway.stores.jobs;
    const lookUp = jobs.byIdempotencyKey.bind(jobs);
    let first: Response | undefined;
    vi.spyOn(jobs, "byIdempotencyKey").mockImplementationOnce(async (tenantId, key) => {
      const before = await lookUp(tenantId, key);
      first = await keyed(a, "/v1/jobs", "twice", body);
      return before;
    });
    const second = await keyed(b, "/v1/jobs", "twice", body);
    expect(first?.status).toBe(202);
    expect(second.status).toBe(202);
    const made = (await first?.json()) as { id: string };
    expect(((await second.json()) as { id: string }).id).toBe(made.id);
    expect((await a.api(`/v1/jobs/${made.id}/cancel`, { method: "POST" })).status).toBe(200);
  });

  it("gets the batch the other gateway made, not 429", async () => {
    const body = { model: "noop", items: [{ input: {} }] };
    const jobs = b.gateway.stores.jobs;
    const lookUp = jobs.batchByIdempotencyKey.bind(jobs);
    let first: Response | undefined;
    vi.spyOn(jobs, "batchByIdempotencyKey").mockImplementationOnce(async (tenantId, key) => {
      const before = await lookUp(tenantId, key);
      first = await keyed(a, "/v1/batches", "batch-twice", body);
      return before;
    });
    const second = await keyed(b, "/v1/batches", "batch-twice", body);
    expect(first?.status).toBe(202);
    expect(second.status).toBe(202);
    const made = (await first?.json()) as { id: string };
    expect(((await second.json()) as { id: string }).id).toBe(made.id);
  });

  it("gets the batch the other gateway is still making, once it is sealed", async () => {
    const body = { model: "noop", items: [{ input: {} }] };
    // A tenant of its own: none of the earlier tests' counts.
    const tenantKey = await a.addTenant("ten_unsealed");
    const patched = await a.api("/v1/admin/tenants/ten_unsealed", {
      method: "PATCH",
      json: { limits: { max_queued_jobs: 1 } },
    });
    expect(patched.status).toBe(200);
    const send = (gw: TestGateway) =>
      gw.api("/v1/batches", {
        method: "POST",
        headers: { authorization: `Bearer ${tenantKey}`, "idempotency-key": "unsealed" },
        json: body,
      });
    // A's request stops before its seal, its job made, until B's refusal has read the batch.
    const atSeal = gate();
    const sealGate = gate();
    const aJobs = a.gateway.stores.jobs;
    const seal = aJobs.sealBatch.bind(aJobs);
    vi.spyOn(aJobs, "sealBatch").mockImplementationOnce(async (...args) => {
      atSeal.resolve();
      await sealGate.promise;
      return seal(...args);
    });
    const bJobs = b.gateway.stores.jobs;
    const lookUp = bJobs.batchByIdempotencyKey.bind(bJobs);
    let first: Promise<Response> | undefined;
    vi.spyOn(bJobs, "batchByIdempotencyKey")
      .mockImplementationOnce(async (tenantId, key) => {
        const before = await lookUp(tenantId, key);
        first = send(a);
        await atSeal.promise;
        return before;
      })
      .mockImplementationOnce(async (tenantId, key) => {
        const unsealed = await lookUp(tenantId, key);
        sealGate.resolve();
        return unsealed;
      });
    const second = await send(b);
    const answered = await first;
    expect(answered?.status).toBe(202);
    expect(second.status).toBe(202);
    const made = (await answered?.json()) as { id: string };
    expect(((await second.json()) as { id: string }).id).toBe(made.id);
  });
});
