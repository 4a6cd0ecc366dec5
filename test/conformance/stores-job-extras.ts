import { expect, it } from "vitest";
import type { Stores } from "../../gateway/store/kysely-stores.ts";
import { RECENT_STARTS, type ReleaseSnapshot } from "../../gateway/store/release-snapshot.ts";
import { newWebhookSecret } from "../../gateway/webhooks/secret.ts";
import type { JobError } from "../../shared/protocol/index.ts";
import { freshModel, freshTenant, newJob, T0 } from "./stores-jobs.ts";

/** The JobStore's retries, dead letters and queue standing: the rest of the jobs half. */

const error = (code: string): JobError => ({ type: "permanent", code, message: code });

export function jobExtraCases(stores: () => Stores): void {
  const jobs = () => stores().jobs;
  const insert = async (overrides: Parameters<typeof newJob>[0] = {}) => {
    const row = await jobs().insert(newJob(overrides));
    if (!row) throw new Error("insert refused");
    return row;
  };
  /** A job of `model` that failed with `code` at `at`. */
  const failed = async (tenantId: string, model: string, code: string, at: number) => {
    const row = await insert({ tenantId, model, now: at - 10 });
    await jobs().claim(row.id, "agt_a", 1, at - 5);
    const result = await jobs().fail(row.id, 1, error(code), false, at);
    if (!result.ok) throw new Error("fail refused");
    return row.id;
  };

  it("jobs: a finished job is retried under its id, afresh, by its tenant only; its events stay", async () => {
    const tenant = freshTenant();
    const id = await failed(tenant, "noop", "boom", T0);
    expect((await jobs().retry(freshTenant(), id, T0 + 1, T0 + 99)).ok).toBe(false);
    const retried = await jobs().retry(tenant, id, T0 + 1, T0 + 99);
    expect(retried).toMatchObject({
      ok: true,
      job: { status: "queued", attempt: 0, agent_id: null, output: null, error: null },
    });
    expect(retried.ok && retried.job).toMatchObject({ finished_at: null, expires_at: T0 + 99 });
    expect((await jobs().retry(tenant, id, T0 + 2, T0 + 99)).ok).toBe(false);
    expect((await jobs().eventsAfter(id, 0)).map((event) => event.status)).toEqual([
      "queued",
      "running",
      "failed",
      "queued",
    ]);
    // The claims of its earlier life no longer count against its attempts.
    expect(await jobs().claims(id)).toBe(0);
    await jobs().claim(id, "agt_b", 1, T0 + 3);
    expect(await jobs().claims(id)).toBe(1);
  });

  it("jobs: a job keeps its timeout (and whether it is the default) through claims and a retry", async () => {
    const tenant = freshTenant();
    const model = freshModel();
    const own = await insert({
      tenantId: tenant,
      model,
      timeoutSeconds: 42,
      timeoutDefault: false,
    });
    const byDefault = await insert({
      tenantId: tenant,
      model,
      timeoutSeconds: 120,
      timeoutDefault: true,
    });
    const older = await insert({ tenantId: tenant, model });
    expect(
      [own, byDefault, older].map((row) => [row.timeout_seconds, row.timeout_default]),
    ).toEqual([
      [42, 0],
      [120, 1],
      [null, null],
    ]);
    // The batched claim returns rows from a raw statement: its columns must include these.
    const claimed = await jobs().claimMany(
      [own, byDefault].map((row) => ({ id: row.id, attempt: 1 })),
      { agentId: "agt_a", now: T0 + 10, models: [model] },
    );
    expect(claimed.map((row) => [row.id, row.timeout_seconds, row.timeout_default]).sort()).toEqual(
      [
        [own.id, 42, 0],
        [byDefault.id, 120, 1],
      ].sort(),
    );
    await jobs().fail(own.id, 1, error("timeout"), false, T0 + 20);
    const retried = await jobs().retry(tenant, own.id, T0 + 30, T0 + 99);
    expect(retried.ok && retried.job.timeout_seconds).toBe(42);
  });

  it("jobs: dead letters are failed jobs in id order, by model, error code, time and cursor", async () => {
    const model = freshModel();
    const tenant = freshTenant();
    const a = await failed(tenant, model, "timeout", T0 + 100);
    const b = await failed(freshTenant(), model, "invalid_params", T0 + 200);
    const c = await failed(tenant, model, "timeout", T0 + 300);
    await insert({ tenantId: tenant, model });
    const ids = async (
      filter: Omit<Parameters<ReturnType<typeof jobs>["deadLetters"]>[0], "model">,
    ) => (await jobs().deadLetters({ model, ...filter })).map((row) => row.id);
    expect(await ids({ limit: 10 })).toEqual([a, b, c]);
    expect(await ids({ limit: 10, code: "timeout" })).toEqual([a, c]);
    expect(await ids({ limit: 10, since: T0 + 200 })).toEqual([b, c]);
    expect(await ids({ limit: 1, after: a })).toEqual([b]);
    expect(await ids({ limit: 10, code: "nothing" })).toEqual([]);
  });

  it("jobs: the queue ahead of a job counts higher priorities, then older jobs of its model", async () => {
    const model = freshModel();
    const tenant = freshTenant();
    const low = await insert({ tenantId: tenant, model, priority: 2, now: T0 });
    const old = await insert({ tenantId: tenant, model, priority: 5, now: T0 + 1 });
    const high = await insert({ tenantId: freshTenant(), model, priority: 9, now: T0 + 2 });
    const mine = await insert({ tenantId: tenant, model, priority: 5, now: T0 + 3 });
    await insert({ tenantId: tenant, model: freshModel(), priority: 9, now: T0 });
    // What gateway/jobs/queue-position.ts adds up: range counts and checkpoints.
    const ahead = async (job: { id: string; priority: number }) =>
      (await jobs().countQueued(model, { priorityAbove: job.priority, priorityBelow: 10 }, 100)) +
      (await jobs().countQueued(model, { priority: job.priority, beforeId: job.id }, 100));
    expect(await ahead(high)).toBe(0);
    expect(await ahead(old)).toBe(1);
    expect(await ahead(mine)).toBe(2);
    expect(await ahead(low)).toBe(3);
    expect(await jobs().countQueued(model, { priority: 5, afterId: old.id }, 100)).toBe(1);
    expect(await jobs().countQueued(model, { priorityAbove: 2, priorityBelow: 9 }, 1)).toBe(1);
    expect(await jobs().queueCheckpoints(model, 2)).toEqual([
      { id: old.id, priority: 5, rank: 2 },
      { id: low.id, priority: 2, rank: 4 },
    ]);
    await jobs().claim(high.id, "agt_a", 1, T0 + 10);
    await jobs().claim(old.id, "agt_a", 1, T0 + 20);
    expect(await ahead(mine)).toBe(0);
    expect(await jobs().recentStarts(model, T0 + 15, 10)).toEqual([
      { started_at: T0 + 20, queue_ms: 19 },
    ]);
    expect(await jobs().recentStarts(model, T0, 10)).toEqual([
      { started_at: T0 + 20, queue_ms: 19 },
      { started_at: T0 + 10, queue_ms: 8 },
    ]);
  });

  it("jobs: silentQueued lists retried queued jobs unheard of since a time; failQueued fails one if unchanged", async () => {
    const tenantId = freshTenant();
    const fresh = await insert({ tenantId, now: T0 });
    const retried = await insert({ tenantId, now: T0 });
    await jobs().markPublished(fresh.id, T0 + 1);
    await jobs().markPublished(retried.id, T0 + 1);
    await jobs().claim(retried.id, "agt_a", 1, T0 + 2);
    const requeued = await jobs().fail(retried.id, 1, error("boom"), true, T0 + 3);
    if (!requeued.ok) throw new Error("fail refused");
    const mine = async (before: number) =>
      (await jobs().silentQueued(before, 10_000))
        .map((row) => row.id)
        .filter((id) => id === fresh.id || id === retried.id);
    expect(await mine(T0 + 3)).toEqual([]);
    expect(await mine(T0 + 4)).toEqual([retried.id]);
    // A change since the row was read wins: nothing happens.
    const stale = { ...requeued.job, last_seq: requeued.job.last_seq - 1 };
    expect((await jobs().failQueued(stale, error("gone"), T0 + 5)).ok).toBe(false);
    const failedNow = await jobs().failQueued(requeued.job, error("gone"), T0 + 5);
    expect(failedNow).toMatchObject({ ok: true, job: { status: "failed", finished_at: T0 + 5 } });
    expect(await mine(T0 + 10)).toEqual([]);
  });

  /** A job of `tenantId` on `model` that started (was claimed) at `at`. */
  const startedAt = async (model: string, tenantId: string, at: number) => {
    const row = await insert({ tenantId, model, now: at - 10 });
    if (!(await jobs().claim(row.id, "agt_a", 1, at)).ok) throw new Error("claim refused");
    return row.id;
  };
  /** A job of each tenant held, then what a release pass of `model` reads: tenant → last start. */
  const lastStartsSeen = async (model: string, tenants: string[], now: number) => {
    for (const tenantId of tenants) await insert({ tenantId, model, held: true, now: now - 50 });
    let line: ReleaseSnapshot | undefined;
    const look = (snapshot: ReleaseSnapshot) => {
      line = snapshot;
      return [];
    };
    await jobs().releaseJobs(model, 10, look, now);
    expect(line?.lanes.map((lane) => lane.tenantId).sort()).toEqual([...tenants].sort());
    return new Map(line?.lastStarted.map(({ tenantId, at }): [string, number] => [tenantId, at]));
  };

  it("a release pass's line says when each of its tenants last started a job of the model", async () => {
    const model = freshModel();
    const [a, b] = [freshTenant(), freshTenant()];
    for (const [tenantId, at] of [
      [a, T0 + 100],
      [b, T0 + 200],
      [b, T0 + 220],
    ] as const) {
      await jobs().succeed(await startedAt(model, tenantId, at), 1, null, at + 5, "agt_a");
    }
    // What breaks the tie between two tenants with nothing running: who started last.
    expect(await lastStartsSeen(model, [a, b], T0 + 300)).toEqual(
      new Map([
        [a, T0 + 100],
        [b, T0 + 220],
      ]),
    );
  });

  it("a release pass reads only the model's latest starts: one older than them reads as none", async () => {
    const model = freshModel();
    const [a, b] = [freshTenant(), freshTenant()];
    await startedAt(model, a, T0 + 100);
    for (let i = 1; i <= RECENT_STARTS; i++) await startedAt(model, b, T0 + 100 + i);
    expect(await lastStartsSeen(model, [a, b], T0 + 1_000)).toEqual(
      new Map([[b, T0 + 100 + RECENT_STARTS]]),
    );
  });

  it("a release pass's line: its window, each lane, the tenants' counts and plans; a full window or none held, no choice", async () => {
    const [model, other, lone] = [freshModel(), freshModel(), freshModel()];
    const [a, b] = [freshTenant(), freshTenant()];
    for (const [id, plan] of [
      [a, "pro"],
      [b, "free"],
    ] as const) {
      await stores().tenants.insert({
        id,
        name: id,
        plan,
        webhookSecret: newWebhookSecret(),
        now: T0,
      });
    }
    await startedAt(model, a, T0 + 1);
    await startedAt(other, a, T0 + 1);
    await insert({ tenantId: a, model, now: T0 + 2 }); // released
    const heldA = await insert({ tenantId: a, model, held: true, now: T0 + 3 });
    await insert({ tenantId: a, model, held: true, now: T0 + 4 });
    const heldB = await insert({ tenantId: b, model, held: true, fairnessKey: "u1", now: T0 + 5 });
    const seen: ReleaseSnapshot[] = [];
    const look = (snapshot: ReleaseSnapshot) => {
      seen.push(snapshot);
      return [];
    };
    await jobs().releaseJobs(model, 10, look, T0 + 10);
    const [line] = seen;
    expect(line).toMatchObject({ model, released: 1, running: 1 });
    expect([...(line?.lanes ?? [])].sort((x, y) => (x.tenantId < y.tenantId ? -1 : 1))).toEqual(
      [
        { priority: 5, tenantId: a, fairnessKey: null, held: 2, oldestId: heldA.id },
        { priority: 5, tenantId: b, fairnessKey: "u1", held: 1, oldestId: heldB.id },
      ].sort((x, y) => (x.tenantId < y.tenantId ? -1 : 1)),
    );
    expect(line?.active).toEqual([{ tenantId: a, fairnessKey: null, count: 2 }]);
    // Running and released on every model: what max_running_jobs bounds.
    expect(line?.tenantActive).toEqual(new Map([[a, 3]]));
    expect(line?.tenants).toEqual(
      new Map([
        [a, { plan: "pro", limits: null }],
        [b, { plan: "free", limits: null }],
      ]),
    );
    // A window of one is full (one running, one released): the pass chooses nothing, and
    // says that jobs wait.
    expect(await jobs().releaseJobs(model, 1, look, T0 + 10)).toEqual({ released: [], held: true });
    expect(seen).toHaveLength(1);
    // Nor when nothing is held, and it says so.
    expect(await jobs().releaseJobs(other, 10, look, T0 + 10)).toEqual({
      released: [],
      held: false,
    });
    expect(seen).toHaveLength(1);
    // One lane alone is counted up to twice the window.
    for (let i = 0; i < 3; i++) await insert({ tenantId: a, model: lone, held: true, now: T0 + i });
    await jobs().releaseJobs(lone, 1, look, T0 + 10);
    expect(seen[1]?.lanes).toMatchObject([{ tenantId: a, held: 2 }]);
  });
}
