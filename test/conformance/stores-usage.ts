import { expect, it } from "vitest";
import { toJob } from "../../gateway/store/job-rows.ts";
import type { Stores } from "../../gateway/store/kysely-stores.ts";
import type { ReleaseSnapshot } from "../../gateway/store/release-snapshot.ts";
import type { JobError } from "../../shared/protocol/index.ts";
import { freshModel, freshTenant, newJob, T0 } from "./stores-jobs.ts";

/**
 * Usage (migration 0022): what each report's run used lands on its job and, in the same
 * statement, in the hourly rollup, which the usage store reads back and prunes.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const PERMANENT: JobError = { type: "permanent", code: "bad_input", message: "bad" };
const TRANSIENT: JobError = { type: "transient", code: "runner_crashed", message: "crash" };

export function usageStoreCases(stores: () => Stores): void {
  const jobs = () => stores().jobs;
  /** A job of this tenant, key and model, claimed by `agt_u` at `at`. */
  const running = async (tenantId: string, model: string, keyId: string | null, at: number) => {
    const row = await jobs().insert(newJob({ tenantId, model, keyId, now: at - 10 }));
    if (!row) throw new Error("insert refused");
    // Released to the queue first, every lane whole (the fair release is not tested here).
    const everyLane = (snapshot: ReleaseSnapshot) =>
      snapshot.lanes.map((lane) => ({ ...lane, count: lane.held, maxActive: 1_000_000 }));
    await jobs().releaseJobs(model, 1_000_000, everyLane, at - 8);
    if (!(await jobs().claim(row.id, "agt_u", 1, at - 5)).ok) throw new Error("claim refused");
    return row.id;
  };
  const everything = (tenantId: string) =>
    stores().usage.report({ tenantId, from: 0, to: T0 + 400 * DAY, groupBy: [] });

  it("usage: billed and wasted runs roll up per tenant, key, model and hour, as their jobs show", async () => {
    const tenant = freshTenant();
    const [ocr, rmbg] = [freshModel(), freshModel()];
    const run = (gpuMs: number, billable: boolean) => ({
      gpuMs,
      billable,
      provider: "cuda",
      device: "NVIDIA H200",
    });
    // Hour 0: a success and a failure of its own input (billed), a crash (wasted) then a
    // success on the retry of that job (billed), all key A, model ocr.
    const a = await running(tenant, ocr, "key_a", T0 + 1000);
    await jobs().succeed(a, 1, { ok: 1 }, T0 + 2000, "agt_u", run(120, true));
    const b = await running(tenant, ocr, "key_a", T0 + 1000);
    await jobs().fail(b, 1, PERMANENT, false, T0 + 2000, "agt_u", run(30, true));
    const c = await running(tenant, ocr, "key_a", T0 + 1000);
    await jobs().fail(c, 1, TRANSIENT, true, T0 + 2000, "agt_u", run(70, false));
    await jobs().claim(c, "agt_u", 2, T0 + 2100);
    await jobs().succeed(c, 2, null, T0 + 2500, "agt_u", run(80, true));
    // Hour 1: key B on rmbg, through the batched success; and a job without a key.
    const d = await running(tenant, rmbg, "key_b", T0 + HOUR + 10);
    const e = await running(tenant, rmbg, null, T0 + HOUR + 10);
    const settled = await jobs().succeedMany(
      [
        { id: d, attempt: 1, output: 1, run: run(40, true) },
        { id: e, attempt: 1, output: 2, run: { gpuMs: 5.4, billable: true } },
      ],
      { agentId: "agt_u", now: T0 + HOUR + 20 },
    );
    expect(settled).toHaveLength(2);
    // A release (an eviction) is wasted; a report the store refuses records nothing.
    const f = await running(tenant, rmbg, "key_b", T0 + HOUR + 10);
    await jobs().release(f, 1, T0 + HOUR + 30, "agt_u", run(9, false));
    await jobs().succeed(f, 1, null, T0 + HOUR + 31, "agt_u", run(1000, true));

    const byRow = await Promise.all([a, b, c, d, e, f].map((id) => jobs().byId(id)));
    const metrics = byRow.map((row) => (row ? toJob(row).metrics : undefined));
    expect(metrics.map((m) => [m?.gpu_ms, m?.wasted_gpu_ms])).toEqual([
      [120, undefined],
      [30, undefined],
      [80, 70],
      [40, undefined],
      [5, undefined],
      [0, 9],
    ]);
    expect(metrics[0]).toMatchObject({ provider: "cuda", device: "NVIDIA H200" });

    const grouped = await stores().usage.report({
      tenantId: tenant,
      from: T0 - DAY,
      to: T0 + DAY,
      groupBy: ["model", "key"],
    });
    expect(grouped).toEqual(
      [
        { model: ocr, key_id: "key_a", jobs: 3, gpu_ms: 230, wasted_gpu_ms: 70 },
        { model: rmbg, key_id: null, jobs: 1, gpu_ms: 5, wasted_gpu_ms: 0 },
        { model: rmbg, key_id: "key_b", jobs: 1, gpu_ms: 40, wasted_gpu_ms: 9 },
      ].sort((x, y) => `${x.model}${x.key_id ?? ""}`.localeCompare(`${y.model}${y.key_id ?? ""}`)),
    );
    // Exact: the period's sum is its jobs' `metrics.gpu_ms`, summed.
    const [total] = await everything(tenant);
    const jobsSum = metrics.reduce((sum, m) => sum + (m?.gpu_ms ?? 0), 0);
    expect(total).toEqual({ jobs: 5, gpu_ms: jobsSum, wasted_gpu_ms: 79 });
    // Half-open hours: only hour 0 in [H0, H0 + 1h).
    const H0 = T0 - (T0 % HOUR);
    const hourZero = await stores().usage.report({
      tenantId: tenant,
      from: H0,
      to: H0 + HOUR,
      groupBy: [],
    });
    expect(hourZero).toEqual([{ jobs: 3, gpu_ms: 230, wasted_gpu_ms: 70 }]);
    expect(await stores().usage.billedSince(tenant, H0 + HOUR)).toBe(45);
  });

  it("usage: a run whose agent is gone counts as wasted from its start to its last heartbeat", async () => {
    const tenant = freshTenant();
    const model = freshModel();
    // Redelivered: attempt 2's claim takes over attempt 1, last heard of 300 ms after it began.
    const redelivered = await running(tenant, model, "key_a", T0 + 1000);
    await jobs().heartbeat(redelivered, 1, T0 + 1295);
    expect((await jobs().claim(redelivered, "agt_v", 2, T0 + 9000)).ok).toBe(true);
    // Its second run waited 1.2 s for its model to load.
    const cold = { gpuMs: 90, billable: true, loadMs: 1234.4 };
    await jobs().succeed(redelivered, 2, null, T0 + 9100, "agt_v", cold);
    // The same through the batched claim: 100 ms.
    const batched = await running(tenant, model, "key_a", T0 + 1000);
    await jobs().heartbeat(batched, 1, T0 + 1095);
    const taken = await jobs().claimMany([{ id: batched, attempt: 2 }], {
      agentId: "agt_v",
      now: T0 + 9000,
      models: [model],
    });
    expect(taken).toHaveLength(1);
    const loaded = { gpuMs: 0, billable: true, loadMs: 40 };
    const batchedDone = await jobs().succeedMany(
      [{ id: batched, attempt: 2, output: 1, run: loaded }],
      {
        agentId: "agt_v",
        now: T0 + 9100,
      },
    );
    expect(batchedDone).toHaveLength(1);
    // Found stale by the sweeper: 200 ms of beats, then silence.
    const stale = await running(tenant, model, "key_a", T0 + 1000);
    await jobs().heartbeat(stale, 1, T0 + 1195);
    const row = await jobs().byId(stale);
    if (!row) throw new Error("job gone");
    const reclaimed = await jobs().reclaimStale(row, T0 + 5000, TRANSIENT, true, T0 + 6000);
    expect(reclaimed.ok).toBe(true);

    const metrics = await Promise.all(
      [redelivered, batched, stale].map(async (id) => {
        const job = await jobs().byId(id);
        return job ? toJob(job).metrics : undefined;
      }),
    );
    expect(metrics.map((m) => [m?.gpu_ms, m?.wasted_gpu_ms, m?.load_ms])).toEqual([
      [90, 300, 1234],
      [0, 100, 40],
      [0, 200, undefined],
    ]);
    // A queued job's claim takes nothing over: nothing wasted.
    expect(await everything(tenant)).toEqual([{ jobs: 2, gpu_ms: 90, wasted_gpu_ms: 600 }]);
  });

  it("usage: days group the hours, every tenant's report names tenants, and the rollup outlives its jobs until pruned", async () => {
    const [one, two] = [freshTenant(), freshTenant()];
    const model = freshModel();
    const billed = { gpuMs: 1000, billable: true };
    // A time far from the other tests' so that pruning finds only these rows first.
    const base = T0 - 400 * DAY;
    for (const [tenant, at] of [
      [one, base + HOUR],
      [one, base + 5 * HOUR],
      [two, base + DAY + HOUR],
    ] as const) {
      const id = await running(tenant, model, "key_x", at);
      await jobs().succeed(id, 1, null, at, "agt_u", billed);
    }
    const days = await stores().usage.report({
      from: base,
      to: base + 2 * DAY,
      groupBy: ["tenant", "day"],
    });
    // The two tenants' rows in one order on both sides: random ids sort differently by
    // locale ("ten__…" before "ten_6…") than by code unit, as the stores may.
    const byTenant = (x: { tenant_id?: string }, y: { tenant_id?: string }) =>
      (x.tenant_id ?? "") < (y.tenant_id ?? "") ? -1 : 1;
    const ours = days
      .filter((row) => row.tenant_id === one || row.tenant_id === two)
      .sort(byTenant);
    expect(ours).toEqual(
      [
        { tenant_id: one, day: base - (base % DAY), jobs: 2, gpu_ms: 2000, wasted_gpu_ms: 0 },
        {
          tenant_id: two,
          day: base + DAY - ((base + DAY) % DAY),
          jobs: 1,
          gpu_ms: 1000,
          wasted_gpu_ms: 0,
        },
      ].sort(byTenant),
    );
    // Pruning goes a day at a time, oldest first, and leaves later hours.
    let pruned = 0;
    for (let i = 0; i < 5; i++) pruned += await stores().usage.prune(base + DAY + 2 * HOUR);
    expect(pruned).toBeGreaterThanOrEqual(3);
    expect(await everything(one)).toEqual([{ jobs: 0, gpu_ms: 0, wasted_gpu_ms: 0 }]);
    expect(await everything(two)).toEqual([{ jobs: 0, gpu_ms: 0, wasted_gpu_ms: 0 }]);
  });
}
