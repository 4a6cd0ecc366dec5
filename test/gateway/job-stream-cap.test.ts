import { describe, expect, it, onTestFinished } from "vitest";
import { submitNoopJobs } from "../helpers/fault-checks.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * `GET /v1/jobs/{id}/events` streams are capped per tenant per gateway, as `GET /v1/events`
 * streams are: each open one is a loop re-reading its job, so without a cap one tenant's
 * client could hold tens of thousands (bounded only by its request rate), each costing the
 * gateway memory and database reads. A stream that ends gives its place back.
 */
describe("a tenant's job event streams", () => {
  it("are capped per gateway; one that ends frees its place", async () => {
    const gw = await startTestGateway({ models: ["noop"], config: { maxJobStreamsPerTenant: 2 } });
    onTestFinished(() => gw.close());
    // Queued jobs (no agent): their streams stay open.
    const jobs = await submitNoopJobs(gw, 3, () => ({}));
    const cuts = jobs.map(() => new AbortController());
    onTestFinished(() => {
      for (const cut of cuts) cut.abort();
    });
    const open = (index: number) =>
      gw.api(`/v1/jobs/${jobs[index]?.id}/events`, { signal: cuts[index]?.signal });

    expect((await open(0)).status).toBe(200);
    expect((await open(1)).status).toBe(200);
    const refused = await open(2);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("content-type")).toContain("application/problem+json");
    expect(((await refused.json()) as { code: string }).code).toBe("too_many_streams");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);

    cuts[0]?.abort();
    let reopened = 0;
    for (let i = 0; i < 50 && reopened !== 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const again = await open(2);
      reopened = again.status;
      if (reopened !== 200) await again.body?.cancel();
    }
    expect(reopened).toBe(200);
  });
});
