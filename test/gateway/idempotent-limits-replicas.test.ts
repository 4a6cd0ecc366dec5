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
    config: { apiKeyCacheMs: 0 },
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
});
