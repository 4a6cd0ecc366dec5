import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * `PATCH /v1/admin/tenants/{id}` with `{"limits": {"share_weight": 4}}`, as docs/api.md shows
 * it for a weight (and `{"output_retention_seconds": 3600}` for retention), changes that
 * limit: it replaced the tenant's overrides as a whole, so setting a weight silently dropped
 * the tenant's budget, rate and retention overrides. Each field sent now replaces its own
 * override (`null` included, as `monthly_gpu_seconds: null` for no budget), the others stay,
 * and `limits: null` still clears them all.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  const made = await gw.api("/v1/admin/tenants", {
    method: "POST",
    json: {
      name: "Acme",
      id: "ten_merge",
      plan: "pro",
      limits: { rate_per_second: 50, burst: 200 },
    },
  });
  expect(made.status).toBe(201);
}, 60_000);
afterAll(() => gw?.close());

const patch = async (json: unknown) => {
  const answer = await gw.api("/v1/admin/tenants/ten_merge", { method: "PATCH", json });
  expect(answer.status).toBe(200);
  return (await answer.json()) as {
    plan: string;
    overrides: Record<string, unknown> | null;
    limits: Record<string, unknown>;
  };
};

it("changes the limits a PATCH names and keeps the tenant's other overrides", async () => {
  const weighted = await patch({ limits: { share_weight: 4 } });
  expect(weighted.overrides).toEqual({ rate_per_second: 50, burst: 200, share_weight: 4 });
  expect(weighted.limits).toMatchObject({ rate_per_second: 50, burst: 200, share_weight: 4 });

  const retention = await patch({ limits: { output_retention_seconds: 3600, burst: 300 } });
  expect(retention.overrides).toEqual({
    rate_per_second: 50,
    burst: 300,
    share_weight: 4,
    output_retention_seconds: 3600,
  });

  // A null value is that override's own (no budget), not a removal.
  const unbudgeted = await patch({ limits: { monthly_gpu_seconds: null } });
  expect(unbudgeted.overrides).toMatchObject({ share_weight: 4, monthly_gpu_seconds: null });
  expect(unbudgeted.limits.monthly_gpu_seconds).toBeNull();

  // A plan change alone keeps them; `limits: null` clears them all.
  expect((await patch({ plan: "enterprise" })).overrides).toMatchObject({ share_weight: 4 });
  const cleared = await patch({ limits: null });
  expect(cleared.overrides).toBeNull();
  expect(cleared.limits).toMatchObject({ share_weight: 1, burst: 500 });
});

it("refuses a change whose merged limits do not hold together, keeping the stored ones", async () => {
  await patch({ limits: { priority_min: 5, priority_max: 6, priority_default: 5 } });
  const refused = await gw.api("/v1/admin/tenants/ten_merge", {
    method: "PATCH",
    json: { limits: { priority_default: 9 } },
  });
  expect(refused.status).toBe(422);
  const read = (await (await gw.api("/v1/admin/tenants/ten_merge")).json()) as {
    overrides: Record<string, unknown>;
  };
  expect(read.overrides).toEqual({ priority_min: 5, priority_max: 6, priority_default: 5 });
});
