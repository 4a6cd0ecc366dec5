/**
 * The passes after claims and ends gather for longer while nothing of the model waits in
 * the store (gateway/jobs/release.ts): the last pass that looked found none of its jobs
 * held. Held jobs, or no pass yet, bring the short gathering back.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { afterChangeDelayMs, releaseModel } from "../../gateway/jobs/release.ts";
import { proTenant } from "../helpers/pro-tenant.ts";
import { releaseTestGateway } from "../helpers/sweep-gateway.ts";

describe("gathering the passes after claims and ends", () => {
  let rig: Awaited<ReturnType<typeof releaseTestGateway>>;
  let gateway: Gateway;
  let clock = Date.now();

  beforeAll(async () => {
    rig = await releaseTestGateway(() => clock, { releaseWindow: 2, queueDepthCacheMs: 0 });
    ({ gateway } = rig);
  });
  afterAll(() => rig?.close());

  it("gathers long only while the last pass found nothing of the model held", async () => {
    // Nobody has looked: short.
    const soon = afterChangeDelayMs(gateway, "noop");
    await releaseModel(gateway, "noop");
    const idle = afterChangeDelayMs(gateway, "noop");
    expect(idle).toBeGreaterThan(soon);

    // Four submits into a window of two: two wait held, and the pass that finds them says so.
    const { tenant } = await proTenant(rig.database.db, "ten_gather", { max_running_jobs: 100 });
    for (let i = 0; i < 4; i++) {
      clock++;
      await rig.submitNoop(tenant);
    }
    await releaseModel(gateway, "noop");
    expect(afterChangeDelayMs(gateway, "noop")).toBe(soon);
  });
});
