import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * The operator's export, `GET /v1/admin/usage`. It answers CSV to a client that asks for it
 * (`Accept: text/csv`), by the Accept header's own rules: any mention of text/csv used to
 * win, so a client preferring JSON (`application/json, text/csv;q=0.1`), or refusing CSV
 * outright (`text/csv;q=0`), got CSV it could not parse. Its `tenant_id=` takes every id a
 * tenant may have: it took at most 64 characters, where ids run to 68 (`ten_` and 64).
 */
let gw: InProcessGateway;
let key: string;
beforeAll(async () => {
  gw = await startInProcessGateway({ models: ["noop"] });
  key = await gw.addTenant({ id: "ten_usage_op", scopes: ["admin"] });
});
afterAll(() => gw?.close());

const typeFor = async (accept: string) => {
  const response = await gw.request("/v1/admin/usage?group_by=tenant", {
    key,
    headers: { accept },
  });
  expect(response.status).toBe(200);
  return response.headers.get("content-type")?.split(";")[0];
};

describe("the operator's usage export", () => {
  it("is CSV where the client prefers it, JSON otherwise", async () => {
    expect(await typeFor("text/csv")).toBe("text/csv");
    expect(await typeFor("text/csv, application/json;q=0.5")).toBe("text/csv");
    expect(await typeFor("application/json, text/csv;q=0.1")).toBe("application/json");
    expect(await typeFor("text/csv;q=0, application/json")).toBe("application/json");
    expect(await typeFor("*/*")).toBe("application/json");
  });

  it("reads one tenant's usage, whatever the length of its id", async () => {
    const id = `ten_${"a".repeat(64)}`;
    const created = await gw.request("/v1/admin/tenants", {
      method: "POST",
      key,
      json: { name: "long", id },
    });
    expect(created.status).toBe(201);
    const usage = await gw.request(`/v1/admin/usage?tenant_id=${id}`, { key });
    expect(usage.status).toBe(200);
    const unknown = await gw.request(`/v1/admin/usage?tenant_id=ten_${"b".repeat(64)}`, { key });
    expect(unknown.status).toBe(404);
  });
});
