import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * Cross-origin browser access (GANTRY_CORS_ORIGINS): a listed origin's preflight is answered
 * without a key, and its requests may send the API's headers and read the ones it answers;
 * any other origin, and every origin on a gateway that lists none, gets no CORS header.
 */
const APP = "https://app.example";
let listed: TestGateway;
let unlisted: TestGateway;

beforeAll(async () => {
  [listed, unlisted] = await Promise.all([
    startTestGateway({ models: ["noop"], config: { corsOrigins: [APP] } }),
    startTestGateway({ models: ["noop"] }),
  ]);
});
afterAll(async () => {
  await Promise.all([listed?.close(), unlisted?.close()]);
});

const preflight = (gw: TestGateway, origin: string) =>
  fetch(`${gw.url}/v1/jobs`, {
    method: "OPTIONS",
    headers: {
      origin,
      "access-control-request-method": "POST",
      "access-control-request-headers": "authorization, content-type, idempotency-key",
    },
  });

describe("browsers of other origins", () => {
  it("answers a listed origin's preflight, with no key, for the API's headers", async () => {
    const response = await preflight(listed, APP);
    expect(response.status).toBe(204);
    expect(response.headers.get("access-control-allow-origin")).toBe(APP);
    expect(response.headers.get("access-control-allow-methods")).toContain("POST");
    const allowed = response.headers.get("access-control-allow-headers") ?? "";
    for (const name of ["authorization", "content-type", "idempotency-key"]) {
      expect(allowed).toContain(name);
    }
    expect(response.headers.get("vary")).toContain("Origin");
  });

  it("lets a listed origin read what the API answers, a refusal included", async () => {
    const submit = await listed.api("/v1/jobs", {
      method: "POST",
      headers: { origin: APP },
      json: { model: "noop", input: {} },
    });
    expect(submit.status).toBe(202);
    expect(submit.headers.get("access-control-allow-origin")).toBe(APP);
    const exposed = submit.headers.get("access-control-expose-headers") ?? "";
    for (const name of ["location", "retry-after", "ratelimit-remaining"]) {
      expect(exposed).toContain(name);
    }
    const refused = await fetch(`${listed.url}/v1/jobs`, { headers: { origin: APP } });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("access-control-allow-origin")).toBe(APP);
  });

  it("says nothing to an origin not listed, nor on a gateway that lists none", async () => {
    for (const response of [
      await preflight(listed, "https://evil.example"),
      await preflight(unlisted, APP),
      await unlisted.api("/v1/jobs", { headers: { origin: APP } }),
    ]) {
      expect(response.headers.get("access-control-allow-origin")).toBeNull();
    }
  });
});
