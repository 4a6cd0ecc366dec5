import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * The Node gateway's Prometheus metrics are served on a listener of their own
 * (GANTRY_METRICS_PORT, loopback unless GANTRY_METRICS_HOST says otherwise), never on the
 * public port: every tenant's job counts, queue depths and webhook outcomes are the
 * operator's, and each scrape runs GROUP BY queries no anonymous caller should start.
 */

let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"], metricsPort: 0 });
});
afterAll(() => gw.close());

describe("the Node gateway's metrics listener", () => {
  it("serves Prometheus text with jobs by state and queue depth per model, on loopback", async () => {
    const submitted = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: {} },
    });
    expect(submitted.status).toBe(202);
    expect(gw.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const response = await fetch(gw.metricsUrl ?? "");
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/plain");
    const text = await response.text();
    expect(text).toMatch(/gantry_gateway_jobs\{state="queued"\} 1/);
    expect(text).toMatch(/gantry_gateway_queue_depth\{model="noop",state="ready"\} 1/);
    // It serves nothing else: not the API.
    expect((await fetch((gw.metricsUrl ?? "").replace("/metrics", "/v1/jobs"))).status).toBe(404);
  });

  it("is not on the public port: /metrics there is a 404, with a key or without", async () => {
    for (const init of [{}, { headers: { authorization: `Bearer ${gw.apiKey}` } }]) {
      const response = await fetch(`${gw.url}/metrics`, init);
      expect(response.status).toBe(404);
      expect(await response.text()).not.toContain("gantry_gateway");
    }
  });
});

describe("without GANTRY_METRICS_PORT", () => {
  it("opens no metrics listener, and the public port still answers /metrics 404", async () => {
    const plain = await startTestGateway({ models: ["noop"] });
    try {
      expect(plain.metricsUrl).toBeNull();
      expect(plain.addMetrics).toBeNull();
      expect((await fetch(`${plain.url}/metrics`)).status).toBe(404);
    } finally {
      await plain.close();
    }
  });

  it("stops the start with one line naming the setting when the port is taken", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const address = taken.address();
    const port = typeof address === "object" && address ? address.port : 0;
    try {
      await expect(startTestGateway({ models: ["noop"], metricsPort: port })).rejects.toThrow(
        `cannot serve metrics on 127.0.0.1:${port} (EADDRINUSE): set GANTRY_METRICS_PORT or GANTRY_METRICS_HOST`,
      );
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });
});
