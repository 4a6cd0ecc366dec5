import { afterAll, beforeAll, expect, it } from "vitest";
import type { UsageReport } from "../../shared/protocol/index.ts";
import { newJob } from "../conformance/stores-jobs.ts";
import { type InProcessGateway, startInProcessGateway } from "../helpers/in-process-gateway.ts";

/**
 * `GET /v1/usage` reads the month's use afresh for its `budget`, while every answer's
 * `Gantry-Budget-Remaining` comes from a reading up to 2 s old: the same answer said
 * `gantry-budget-remaining: 2` over `remaining_gpu_seconds: 0.497`. The usage answer's header
 * is its own fresh figure.
 */
let gw: InProcessGateway;
let key: string;
beforeAll(async () => {
  gw = await startInProcessGateway({ models: ["noop"] });
  key = await gw.addTenant({ id: "ten_budget_header", limits: { monthly_gpu_seconds: 10 } });
});
afterAll(() => gw?.close());

it("says in its header what its body says is left", async () => {
  // A first answer reads the use (none): every answer for 2 s reuses that reading.
  const before = await gw.request("/v1/usage", { key });
  expect(before.headers.get("gantry-budget-remaining")).toBe("10");
  // A run of 7.5 s is recorded (on another gateway, say: nothing here hears of it).
  const now = gw.clock.now;
  const row = await gw.gateway.stores.jobs.insert(
    newJob({ tenantId: "ten_budget_header", now, expiresAt: now + 60_000 }),
  );
  if (!row) throw new Error("not inserted");
  const jobs = gw.gateway.stores.jobs;
  expect((await jobs.claim(row.id, "agt_budget", 1, now)).ok).toBe(true);
  const run = { gpuMs: 7_500, billable: true };
  expect((await jobs.succeed(row.id, 1, {}, now, "agt_budget", run)).ok).toBe(true);
  const after = await gw.request("/v1/usage", { key });
  const report = (await after.json()) as UsageReport;
  expect(report.budget?.remaining_gpu_seconds).toBe(2.5);
  expect(after.headers.get("gantry-budget-remaining")).toBe("2");
});
