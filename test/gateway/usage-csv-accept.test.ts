import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * `GET /v1/admin/usage` answers CSV to a client that asks for it (`Accept: text/csv`), by the
 * Accept header's own rules: any mention of text/csv used to win, so a client preferring
 * JSON (`application/json, text/csv;q=0.1`), or refusing CSV outright (`text/csv;q=0`), got
 * CSV it could not parse.
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
});
