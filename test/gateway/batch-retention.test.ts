import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A batch goes with its jobs: once retention or a tenant's purge has deleted every job of an
 * ended batch, the batch (its metadata, its webhook URL) goes too, rather than stay for ever
 * answering `total: 2` with every count 0. No agent runs: the jobs end by being canceled.
 */
describe("batches and retention", () => {
  let gw: TestGateway;
  let key: string;
  beforeAll(async () => {
    gw = await startTestGateway({ models: ["noop"] });
    key = await gw.addTenant("ten_leaving");
  }, 60_000);
  afterAll(() => gw?.close());

  const as = (path: string, init: RequestInit & { json?: unknown } = {}) =>
    gw.api(path, { ...init, headers: { authorization: `Bearer ${key}` } });

  it("deletes a tenant's ended batches with its jobs when it is purged", async () => {
    const made = await as("/v1/batches", {
      method: "POST",
      json: {
        model: "noop",
        items: [{ input: {} }, { input: {} }],
        metadata: { customer: "acme" },
      },
    });
    const { id } = (await made.json()) as { id: string };
    expect((await as(`/v1/batches/${id}/cancel`, { method: "POST", json: {} })).status).toBe(200);
    let done = false;
    for (let pass = 0; pass < 10 && !done; pass++) {
      const purge = await gw.api("/v1/admin/tenants/ten_leaving/purge", {
        method: "POST",
        json: {},
      });
      expect(purge.status).toBe(200);
      done = ((await purge.json()) as { done: boolean }).done;
    }
    expect(done).toBe(true);
    expect((await as(`/v1/batches/${id}`)).status).toBe(404);
    const left = await gw.db.selectFrom("batches").select("id").where("id", "=", id).execute();
    expect(left).toEqual([]);
  });
});
