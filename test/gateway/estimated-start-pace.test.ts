import { afterAll, beforeAll, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { jobView } from "../../gateway/jobs/job-view.ts";
import type { JobRow } from "../../gateway/store/job-rows.ts";
import { newId } from "../../shared/ids.ts";
import { newJob } from "../conformance/stores-jobs.ts";
import { releaseTestGateway } from "../helpers/sweep-gateway.ts";

/**
 * `estimated_start_at` of a job queued on a model that just got busy after an idle spell:
 * the model's pace over five minutes (its few starts of minutes ago and the last seconds'
 * many, over the whole span) said a tenth of what the agents now start, and the estimate
 * was ten times as late (gantry start: +10 s shown, started after 1 s). It is read from the
 * last minute's pace when that is faster.
 */
let rig: Awaited<ReturnType<typeof releaseTestGateway>>;
let gateway: Gateway;
const clock = Date.now();
let made = 0;

beforeAll(async () => {
  rig = await releaseTestGateway(() => clock, { releaseWindow: 100, queueDepthCacheMs: 0 });
  gateway = rig.gateway;
  const { row: agent } = await gateway.stores.agents.create({ source: "admin", now: clock });
  await gateway.stores.agents.register(
    agent.id,
    { v: 1, models: ["noop"], provider: "cpu", slots: 4, heartbeat_interval_seconds: 5 },
    clock,
  );
});
afterAll(() => rig?.close());

/** A released `noop` job, made at `at`. */
const insert = async (at: number): Promise<JobRow> => {
  const row = await gateway.stores.jobs.insert(
    newJob({
      id: newId("job", at + made++),
      tenantId: "ten_pace",
      model: "noop",
      now: at,
      expiresAt: clock + 3_600_000,
    }),
  );
  if (!row) throw new Error("not inserted");
  return row;
};
const startAt = async (at: number) => {
  const row = await insert(at - 100);
  expect((await gateway.stores.jobs.claim(row.id, "agt_pace", 1, at)).ok).toBe(true);
};

it("comes from the last minute's pace when the model just got busy", async () => {
  // Two starts four minutes ago, then 20 in the last 10 s: two a second now.
  for (const ago of [240_000, 239_000]) await startAt(clock - ago);
  for (let i = 0; i < 20; i++) await startAt(clock - 10_000 + i * 500);
  for (let i = 0; i < 8; i++) await insert(clock - 1_000 + i);
  const mine = await insert(clock);
  const view = await jobView(gateway, mine);
  expect(view.queue_position).toBe(9);
  // 8 ahead at two a second: about 4 s (at the five minutes' pace, 22 starts over 240 s: 87 s).
  const estimate = Date.parse(view.estimated_start_at ?? "") - clock;
  expect(estimate).toBeGreaterThan(2_000);
  expect(estimate).toBeLessThan(8_000);
});
