import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { jobView, listedJobs } from "../../gateway/jobs/job-view.ts";
import { releaseModel } from "../../gateway/jobs/release.ts";
import { submitJob } from "../../gateway/jobs/submit.ts";
import type { JobRow } from "../../gateway/store/job-rows.ts";
import type { Tenant } from "../../gateway/store/tenants.ts";
import type { OpenedDatabase } from "../../shared/db/open.ts";
import { newId, randomToken } from "../../shared/ids.ts";
import { newJob } from "../conformance/stores-jobs.ts";
import { proTenant } from "../helpers/pro-tenant.ts";
import { releaseTestGateway } from "../helpers/sweep-gateway.ts";

/**
 * `queue_position` (and the `waiting_detail` and `estimated_start_at` read from it) of a
 * tenant's job behind another tenant's flood: the fair release takes the trickle's job
 * next, so it waits behind the jobs already released, not behind the flood. It was counted
 * by priority then age among every queued job of the model: a job that started within a
 * second of its submit read "192 jobs are ahead of it" and an estimate five minutes out.
 */
describe("a queued job's place behind another tenant's flood", () => {
  let rig: Awaited<ReturnType<typeof releaseTestGateway>>;
  let database: OpenedDatabase;
  let gateway: Gateway;
  let clock = Date.now();

  beforeAll(async () => {
    rig = await releaseTestGateway(() => clock, { releaseWindow: 4, queueDepthCacheMs: 0 });
    ({ database, gateway } = rig);
    const { row: agent } = await gateway.stores.agents.create({ source: "admin", now: clock });
    await gateway.stores.agents.register(
      agent.id,
      { v: 1, models: ["noop"], provider: "cpu", slots: 1, heartbeat_interval_seconds: 5 },
      clock,
    );
  });
  afterAll(() => rig?.close());

  const tenant = async (limits: Record<string, number> = {}): Promise<Tenant> => {
    const id = `ten_q${randomToken(6).replace(/[^a-z0-9]/gi, "x")}`;
    return (await proTenant(database.db, id, limits)).tenant;
  };
  const submit = async (of: Tenant, fairnessKey?: string) => {
    clock++;
    const request = {
      model: "noop",
      input: {},
      ...(fairnessKey ? { fairness_key: fairnessKey } : {}),
    };
    const options = { idempotencyKey: null, traceparent: null };
    const { job } = await submitJob(gateway, of, request, options);
    await releaseModel(gateway, "noop");
    return job;
  };
  const row = async (id: string): Promise<JobRow> => {
    const found = await gateway.stores.jobs.byId(id);
    if (!found) throw new Error(`no job ${id}`);
    return found;
  };

  it("counts the jobs the fair release takes before it, not every older job", async () => {
    const flood = await tenant();
    const floodJobs: JobRow[] = [];
    for (let i = 0; i < 30; i++) floodJobs.push(await submit(flood));
    const trickle = await tenant();
    const mine = await submit(trickle);
    // The window (4) went to the flood; the trickle's job is held, and taken next.
    expect((await row(mine.id)).released_at).toBeNull();
    const view = await jobView(gateway, await row(mine.id));
    expect(view).toMatchObject({ waiting_reason: "behind_jobs", queue_position: 5 });
    expect(view.waiting_detail).toMatch(/^4 jobs of model noop are ahead of it/);
    const [listed] = await listedJobs(gateway, [await row(mine.id)]);
    expect(listed).toMatchObject({ waiting_reason: "behind_jobs", queue_position: 5 });
    // The flood's last job: behind the window, the trickle's job and the flood's other 25.
    const last = floodJobs.at(-1) as JobRow;
    expect((await jobView(gateway, await row(last.id))).queue_position).toBe(31);
    // The place is the release's: once room opens, the trickle's job is released first.
    const head = floodJobs[0] as JobRow;
    expect((await gateway.stores.jobs.claim(head.id, "agt_q", 1, clock)).ok).toBe(true);
    await gateway.stores.jobs.succeed(head.id, 1, {}, clock);
    await releaseModel(gateway, "noop");
    expect((await row(mine.id)).released_at).not.toBeNull();
  });

  it("places a tenant's jobs in turn by fairness_key", async () => {
    const own = await tenant();
    const first = [await submit(own, "a"), await submit(own, "a"), await submit(own, "a")];
    const other = await submit(own, "b");
    // Nothing ahead of the others is released any more: the window is the flood's above.
    const places = await listedJobs(gateway, [await row(other.id), await row(first[2]!.id)]);
    const [keyB, thirdA] = places.map((job) => job.queue_position);
    expect(keyB).toBeLessThan(thirdA as number);
  });

  it("places a job further back than the turns it follows behind all of them", async () => {
    // Of a model of its own: the lines above are not in the way.
    const model = "ocr";
    let made = 0;
    const hold = (of: Tenant, count: number) =>
      Promise.all(
        Array.from({ length: count }, () =>
          gateway.stores.jobs.insert(
            newJob({
              id: newId("job", clock + made++),
              tenantId: of.id,
              model,
              held: true,
              now: clock,
              expiresAt: clock + 3_600_000,
            }),
          ),
        ),
      );
    // The light tenant's jobs are older, but the heavy one's 1 100 all go first.
    const light = await tenant();
    const [oldest] = await hold(light, 3);
    await hold(await tenant({ share_weight: 10_000 }), 1_100);
    const view = await jobView(gateway, await row((oldest as JobRow).id));
    expect(view.queue_position).toBeGreaterThan(1_000);
  });
});
