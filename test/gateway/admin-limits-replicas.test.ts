import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * `PATCH /v1/admin/tenants/{id}` with `limits` is stored, so it applies on every
 * gateway sharing the database, not only on the one that took the PATCH. The second gateway
 * here caches nothing (`apiKeyCacheMs: 0`); with the default cache it would take up to a
 * second (docs/api.md, API keys and scopes).
 */
let a: TestGateway;
let b: TestGateway;

beforeAll(async () => {
  a = await startTestGateway({ models: ["noop"] });
  b = await startTestGateway({
    models: ["noop"],
    database: { url: a.databaseUrl },
    config: { apiKeyCacheMs: 0 },
  });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

describe("tenant limits across gateways", () => {
  it("applies a PATCHed rate on another gateway", async () => {
    const adminKey = a.apiKey;
    const made = await a.api("/v1/admin/tenants", {
      method: "POST",
      json: { id: "ten_replicas", name: "replicas", plan: "free" },
    });
    expect(made.status).toBe(201);
    const keyAnswer = await a.api("/v1/admin/tenants/ten_replicas/keys", {
      method: "POST",
      json: {},
    });
    const { key } = (await keyAnswer.json()) as { key: string };
    const rateOn = async (gw: TestGateway) =>
      (await gw.api("/v1/jobs", { headers: { authorization: `Bearer ${key}` } })).headers.get(
        "ratelimit-limit",
      );
    expect(await rateOn(b)).toBe("20");
    const patched = await a.api("/v1/admin/tenants/ten_replicas", {
      method: "PATCH",
      headers: { authorization: `Bearer ${adminKey}` },
      json: { limits: { burst: 777 } },
    });
    expect(await patched.json()).toMatchObject({ overrides: { burst: 777 } });
    expect(await rateOn(b)).toBe("777");
    expect(await rateOn(a)).toBe("777");
  });
});
