import { describe, expect, it, onTestFinished } from "vitest";
import { readWorkerSettings } from "../../gateway/runtime/workers/settings.ts";
import { randomToken } from "../../shared/ids.ts";
import { submitNoopJobs } from "../helpers/fault-checks.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * How long an event stream lasts before the gateway ends it (the client resumes with
 * `Last-Event-ID`, missing nothing): `maxStreamSeconds`, 15 minutes by default (5 for a job's
 * stream), shorter on Workers, where every read of a stream's life counts against one
 * invocation's D1 queries (1 000 on the paid plan): `GET /v1/events` polls D1 about twice a
 * second there, so a 15-minute stream would pass the limit after about 8 minutes and then
 * stop delivering without closing.
 */
describe("event streams' length", () => {
  it("ends GET /v1/events and a job's stream at maxStreamSeconds", async () => {
    const gw = await startTestGateway({ models: ["noop"], config: { maxStreamSeconds: 1 } });
    onTestFinished(() => gw.close());
    const [job] = await submitNoopJobs(gw, 1, () => ({}));
    const started = Date.now();
    const [feed, single] = await Promise.all([
      gw.api("/v1/events").then((response) => response.text()),
      gw.api(`/v1/jobs/${job?.id}/events`).then((response) => response.text()),
    ]);
    // Both ended on their own (the queued job never changed), well before any default.
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(feed).toContain("event: ready");
    expect(single).toContain('"status":"queued"');
  });

  it("are at most 4 minutes on Workers", () => {
    const env = {
      GANTRY_AGENT_TOKEN: `gat_${randomToken(24)}`,
      GANTRY_BLOB_SECRET: randomToken(32),
    };
    const r2 = {
      head: async () => null,
      get: async () => null,
      put: async () => null,
      delete: async () => {},
    };
    const { config } = readWorkerSettings({ ...env, BLOBS: r2 }, "http://gantry.test");
    expect(config.maxStreamSeconds).toBe(240);
  });
});
