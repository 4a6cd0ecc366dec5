/**
 * The passes after claims and ends gather for longer while nothing of the model waits in
 * the store (gateway/jobs/release.ts): the last pass that looked found none of its jobs
 * held. Held jobs, or no pass yet, bring the short gathering back. A success or a held submit
 * starts none while the window is full.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import {
  afterChangeDelayMs,
  kickReleaseAfterChange,
  releaseModel,
} from "../../gateway/jobs/release.ts";
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

describe("the pass after a success", () => {
  let rig: Awaited<ReturnType<typeof releaseTestGateway>>;
  let passes = 0;
  let clock = Date.now();

  beforeEach(async () => {
    rig = await releaseTestGateway(() => clock, { releaseWindow: 2, queueDepthCacheMs: 0 });
    const jobs = rig.gateway.stores.jobs;
    const releaseJobs = jobs.releaseJobs.bind(jobs);
    passes = 0;
    jobs.releaseJobs = (...args) => {
      passes++;
      return releaseJobs(...args);
    };
  });
  afterEach(() => rig?.close());

  /** `count` submits of a new tenant's, then a pass that settles what is held and released. */
  async function submitted(count: number, limits: Record<string, number>) {
    const made = await proTenant(rig.database.db, `ten_${passes}_${clock}`, limits);
    for (let i = 0; i < count; i++) {
      clock++;
      await rig.submitNoop(made.tenant);
    }
    await releaseModel(rig.gateway, "noop");
    passes = 0;
    return made;
  }
  // What a pass started in the background would have done by now (it gathers 5 ms).
  const settle = () => new Promise((resolve) => setTimeout(resolve, 150));

  it("is skipped while the window is full: only a claim makes room", async () => {
    const { tenant } = await submitted(4, { max_running_jobs: 100 }); // two released fill the window of two
    kickReleaseAfterChange(rig.gateway, "noop", "succeeded");
    await rig.submitNoop(tenant); // held too: a submit's pass would find no room either
    await settle();
    expect(passes).toBe(0);
    // Other ends may have left the window (a cancel of a released job): they look.
    kickReleaseAfterChange(rig.gateway, "noop", "canceled");
    await vi.waitFor(() => expect(passes).toBe(1));
  });

  it("trusts a full window for a quarter second: another gateway's claims may have made room", async () => {
    const { tenant } = await submitted(4, { max_running_jobs: 100 });
    clock += 300;
    await rig.submitNoop(tenant);
    await vi.waitFor(() => expect(passes).toBe(1));
  });

  it("runs while the window has room and jobs wait under their tenant's limit", async () => {
    await submitted(3, { max_running_jobs: 1 }); // one released, two held by the limit
    kickReleaseAfterChange(rig.gateway, "noop", "succeeded");
    await vi.waitFor(() => expect(passes).toBe(1));
  });
});
