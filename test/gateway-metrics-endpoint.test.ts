import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "./helpers/test-gateway.ts";

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(() => gw.close());

describe("the Node gateway's /metrics", () => {
  it("serves Prometheus text with jobs by state and queue depth per model", async () => {
    const submitted = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: {} },
    });
    expect(submitted.status).toBe(202);
    const response = await fetch(`${gw.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/plain");
    const text = await response.text();
    expect(text).toMatch(/gantry_gateway_jobs\{state="queued"\} 1/);
    expect(text).toMatch(/gantry_gateway_queue_depth\{model="noop",state="ready"\} 1/);
  });
});
