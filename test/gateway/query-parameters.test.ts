import { afterAll, beforeAll, expect, it } from "vitest";
import {
  type InProcessGateway,
  problemOf,
  startInProcessGateway,
} from "../helpers/in-process-gateway.ts";

let gw: InProcessGateway;
let key: string;

beforeAll(async () => {
  gw = await startInProcessGateway();
  key = await gw.addTenant({ id: "ten_query", plan: "pro" });
});
afterAll(() => gw.close());

const get = (path: string) => gw.request(path, { key });

it("refuses a query parameter a listing does not take, instead of listing every job", async () => {
  const typo = await get("/v1/jobs?stauts=failed");
  expect(typo.status).toBe(422);
  expect(await problemOf(typo)).toMatchObject({
    code: "validation_failed",
    detail:
      "query: stauts: unknown parameter (this route takes limit, cursor, status, model, metadata.KEY)",
    errors: [{ path: "stauts", message: expect.stringMatching(/^unknown parameter/) }],
  });
  // Each unknown name is listed.
  const two = await problemOf(await get("/v1/jobs?batch_id=bat_x&state=queued"));
  expect(two.errors).toEqual([
    expect.objectContaining({ path: "batch_id" }),
    expect.objectContaining({ path: "state" }),
  ]);
  const batch = await gw.request("/v1/batches", {
    method: "POST",
    key,
    json: { model: "noop", items: [{ input: { n: 1 } }] },
  });
  expect(batch.status).toBe(202);
  const { id } = (await batch.json()) as { id: string };
  for (const path of [
    `/v1/batches/${id}/jobs?status=queued`,
    "/v1/usage?groupby=model",
    "/v1/admin/tenants?page=2",
    "/v1/admin/agents?state=idle",
    "/v1/admin/usage?tenant=ten_query",
    "/v1/admin/dead-letters?reason=timeout",
    "/v1/events?models=ocr",
    "/v1/models?task=ocr",
    "/v1/admin/tenants/ten_query/keys?revoked=false",
  ]) {
    const answer = await get(path);
    expect(answer.status, path).toBe(422);
    expect((await problemOf(answer)).detail, path).toMatch(/^query: \w+: unknown parameter/);
  }
});

it("refuses any query parameter on the webhook listings, which take none", async () => {
  const submitted = await gw.request("/v1/jobs", {
    method: "POST",
    key,
    json: { model: "noop", input: {}, webhook: { url: "https://hooks.example.com/in" } },
  });
  const { id } = (await submitted.json()) as { id: string };
  for (const path of [
    `/v1/jobs/${id}/webhooks?state=failed`,
    "/v1/webhooks/endpoints?status=disabled",
  ]) {
    const answer = await get(path);
    expect(answer.status, path).toBe(422);
    expect((await problemOf(answer)).detail, path).toMatch(
      /^query: \w+: unknown parameter \(this route takes none\)$/,
    );
    const plain = await get(path.split("?")[0] ?? path);
    expect(plain.status, path).toBe(200);
  }
});

it("takes every parameter a listing documents", async () => {
  for (const path of [
    "/v1/jobs?limit=5&status=queued&model=noop&metadata.customer=acme",
    "/v1/usage?group_by=model,day&from=2026-12-01T00:00:00Z",
    "/v1/admin/tenants?limit=5",
    "/v1/admin/agents?limit=5",
    "/v1/admin/usage?group_by=tenant&tenant_id=ten_query",
    "/v1/admin/dead-letters?model=noop&code=timeout&limit=5",
  ]) {
    const answer = await get(path);
    expect(answer.status, `${path}: ${await answer.clone().text()}`).toBe(200);
  }
});

it("refuses a parameter given twice, instead of reading its first value", async () => {
  const both = await get("/v1/jobs?status=succeeded&status=failed");
  expect(both.status).toBe(422);
  expect(await problemOf(both)).toMatchObject({
    code: "validation_failed",
    detail: "query: status: given 2 times; it takes one value",
    errors: [{ path: "status", message: "given 2 times; it takes one value" }],
  });
  for (const path of [
    "/v1/jobs?limit=1&limit=50",
    "/v1/jobs?metadata.customer=a&metadata.customer=b",
    "/v1/admin/tenants?limit=5&limit=6",
    "/v1/usage?group_by=model&group_by=day",
  ]) {
    const answer = await get(path);
    expect(answer.status, path).toBe(422);
    expect((await problemOf(answer)).detail, path).toMatch(/^query: [\w.]+: given 2 times/);
  }
  // GET /v1/events takes a filter's values repeated or comma-separated, as documented.
  const events = await get("/v1/events?status=succeeded&status=failed");
  expect(events.status).toBe(200);
  await events.body?.cancel();
});
