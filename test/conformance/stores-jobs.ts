import { expect, it } from "vitest";
import type { NewJob } from "../../gateway/store/job-inserts.ts";
import type { Stores } from "../../gateway/store/kysely-stores.ts";
import { newId, randomToken } from "../../shared/ids.ts";
import type { JobError } from "../../shared/protocol/index.ts";

/** The JobStore half of the store conformance suite (see stores.ts). */

export const T0 = 1_750_000_000_000;
const HOUR = 3_600_000;
const TRANSIENT: JobError = { type: "transient", code: "boom", message: "try again" };

/** A tenant id no other test uses: the suite shares one database per backend. */
export const freshTenant = (): string => `ten_${randomToken(9).toLowerCase().replace(/\W/g, "x")}`;
export const freshModel = (): string => `m-${crypto.randomUUID().slice(0, 12)}`;

export function newJob(overrides: Partial<NewJob> = {}): NewJob {
  const now = overrides.now ?? T0;
  return {
    id: newId("job", now),
    tenantId: "ten_conformance",
    model: "noop",
    priority: 5,
    input: { n: 1 },
    webhook: null,
    idempotencyKey: null,
    requestHash: null,
    traceparent: null,
    now,
    expiresAt: now + HOUR,
    ...overrides,
  };
}

export function jobStoreCases(stores: () => Stores): void {
  const jobs = () => stores().jobs;
  const insert = async (overrides: Partial<NewJob> = {}) => {
    const row = await jobs().insert(newJob(overrides));
    if (!row) throw new Error("insert refused");
    return row;
  };
  const statuses = async (id: string) =>
    (await jobs().eventsAfter(id, 0)).map((event) => [event.seq, event.status]);

  it("jobs: inserts a queued job with its first event, readable by id and by its tenant", async () => {
    const tenant = freshTenant();
    const row = await insert({
      tenantId: tenant,
      input: { text: "é ✓" },
      traceparent: "00-ab-cd-01",
    });
    expect(row).toMatchObject({ tenant_id: tenant, status: "queued", attempt: 0, last_seq: 1 });
    expect(typeof row.created_at).toBe("number");
    expect(JSON.parse(row.input)).toEqual({ text: "é ✓" });
    expect(await jobs().byId(row.id)).toEqual(row);
    expect(await jobs().forTenant(tenant, row.id)).toEqual(row);
    expect(await jobs().forTenant(freshTenant(), row.id)).toBeUndefined();
    expect(await jobs().byId("job_missing")).toBeUndefined();
    expect(await statuses(row.id)).toEqual([[1, "queued"]]);
  });

  it("jobs: an Idempotency-Key is the tenant's: a second insert is refused, other tenants' not", async () => {
    const tenant = freshTenant();
    const key = `idem-${randomToken(6)}`;
    const first = await insert({ tenantId: tenant, idempotencyKey: key, requestHash: "h1" });
    expect(await jobs().insert(newJob({ tenantId: tenant, idempotencyKey: key }))).toBeNull();
    expect(await jobs().byIdempotencyKey(tenant, key)).toMatchObject({
      id: first.id,
      request_hash: "h1",
    });
    expect(await jobs().byIdempotencyKey(freshTenant(), key)).toBeUndefined();
    await insert({ tenantId: freshTenant(), idempotencyKey: key });
    // Concurrent inserts share statements; a duplicate among them fails only itself.
    const racing = await Promise.all(
      Array.from({ length: 9 }, (_, i) =>
        jobs().insert(newJob({ tenantId: tenant, idempotencyKey: i % 3 === 0 ? key : null })),
      ),
    );
    expect(racing.map((row) => row === null)).toEqual(
      Array.from({ length: 9 }, (_, i) => i % 3 === 0),
    );
  });

  it("jobs: claims and settlements are fenced by attempt and agent; each bumps the event log", async () => {
    const row = await insert({ tenantId: freshTenant() });
    const now = T0 + 1_000;
    const first = await jobs().claim(row.id, "agt_a", 1, now, ["noop"]);
    expect(first).toMatchObject({
      ok: true,
      job: { status: "running", attempt: 1, agent_id: "agt_a" },
    });
    // The same delivery again, or an older one, is refused and says where the job is.
    const again = await jobs().claim(row.id, "agt_b", 1, now);
    expect(again).toMatchObject({ ok: false, current: { status: "running", agent_id: "agt_a" } });
    // A redelivery (its agent died) takes it over.
    expect((await jobs().claim(row.id, "agt_b", 2, now + 1)).ok).toBe(true);
    expect(await jobs().heartbeat(row.id, 1, now + 2)).toBeUndefined();
    expect(await jobs().heartbeat(row.id, 2, now + 2)).toMatchObject({ updated_at: now + 2 });
    expect((await jobs().succeed(row.id, 1, { late: true }, now + 3)).ok).toBe(false);
    expect((await jobs().succeed(row.id, 2, { x: 1 }, now + 3, "agt_a")).ok).toBe(false);
    const done = await jobs().succeed(row.id, 2, { x: 1 }, now + 3, "agt_b");
    expect(done).toMatchObject({ ok: true, job: { status: "succeeded", finished_at: now + 3 } });
    if (done.ok) expect(JSON.parse(done.job.output ?? "null")).toEqual({ x: 1 });
    expect((await jobs().fail(row.id, 2, TRANSIENT, true, now + 4, "agt_b")).ok).toBe(false);
    expect(await statuses(row.id)).toEqual([
      [1, "queued"],
      [2, "running"],
      [3, "running"],
      [4, "succeeded"],
    ]);
    expect(await jobs().eventsAfter(row.id, 3)).toMatchObject([{ seq: 4, attempt: 2 }]);
    expect(await jobs().claims(row.id)).toBe(2);
  });

  it("jobs: claims honour the models and the deadline; expiry takes only overdue queued jobs", async () => {
    const tenant = freshTenant();
    const row = await insert({ tenantId: tenant, expiresAt: T0 + 10 });
    expect((await jobs().claim(row.id, "agt_a", 1, T0, ["ocr"])).ok).toBe(false);
    expect((await jobs().claim(row.id, "agt_a", 1, T0 + 11)).ok).toBe(false);
    expect((await jobs().expire(row.id, T0 + 5)).ok).toBe(false);
    const overdue = await jobs().overdueQueued(T0 + 11, 10_000);
    expect(overdue.map((job) => job.id)).toContain(row.id);
    expect(await jobs().expire(row.id, T0 + 11)).toMatchObject({
      ok: true,
      job: { status: "expired" },
    });
    expect((await jobs().expire(row.id, T0 + 12)).ok).toBe(false);
  });

  it("jobs: failures retry or end; release requeues; cancel is the tenant's, once", async () => {
    const tenant = freshTenant();
    const row = await insert({ tenantId: tenant });
    await jobs().claim(row.id, "agt_a", 1, T0);
    const retried = await jobs().fail(row.id, 1, TRANSIENT, true, T0 + 1, "agt_a");
    expect(retried).toMatchObject({ ok: true, job: { status: "queued", finished_at: null } });
    if (retried.ok) expect(JSON.parse(retried.job.error ?? "null")).toEqual(TRANSIENT);
    await jobs().claim(row.id, "agt_a", 2, T0 + 2);
    expect(await jobs().release(row.id, 2, T0 + 3, "agt_a")).toMatchObject({
      ok: true,
      job: { status: "queued" },
    });
    await jobs().claim(row.id, "agt_a", 3, T0 + 4);
    const failed = await jobs().fail(row.id, 3, TRANSIENT, false, T0 + 5);
    expect(failed).toMatchObject({ ok: true, job: { status: "failed", finished_at: T0 + 5 } });

    const other = await insert({ tenantId: tenant });
    expect((await jobs().cancel(freshTenant(), other.id, T0)).ok).toBe(false);
    expect(await jobs().cancel(tenant, other.id, T0)).toMatchObject({
      ok: true,
      job: { status: "canceled" },
    });
    expect(await jobs().cancel(tenant, other.id, T0 + 1)).toMatchObject({
      ok: false,
      current: { status: "canceled" },
    });
    expect((await jobs().cancel(tenant, "job_missing", T0)).ok).toBe(false);
  });

  it("jobs: claimMany and succeedMany return only the jobs they changed", async () => {
    const tenant = freshTenant();
    const model = freshModel();
    const rows = await Promise.all(
      [0, 1, 2].map((i) => insert({ tenantId: tenant, model, now: T0 + i })),
    );
    const [a, b, c] = rows.map((row) => row.id) as [string, string, string];
    await jobs().cancel(tenant, c, T0);
    const claimed = await jobs().claimMany(
      [
        { id: a, attempt: 1 },
        { id: b, attempt: 1 },
        { id: c, attempt: 1 },
      ],
      { agentId: "agt_a", now: T0 + 10, models: [model] },
    );
    expect(claimed.map((row) => row.id).sort()).toEqual([a, b].sort());
    expect(claimed.every((row) => row.status === "running" && row.agent_id === "agt_a")).toBe(true);
    const succeeded = await jobs().succeedMany(
      [
        { id: a, attempt: 1, output: { a: true } },
        { id: b, attempt: 2, output: {} },
      ],
      { agentId: "agt_a", now: T0 + 20 },
    );
    expect(succeeded.map((row) => [row.id, row.status, row.output])).toEqual([
      [a, "succeeded", JSON.stringify({ a: true })],
    ]);
    expect(await statuses(a)).toEqual([
      [1, "queued"],
      [2, "running"],
      [3, "succeeded"],
    ]);
  });

  it("jobs: the outbox lists queued jobs until they are marked published", async () => {
    const row = await insert({ tenantId: freshTenant(), now: T0 });
    const pending = async () =>
      (await jobs().unpublished(T0 + 1, 10_000)).some((job) => job.id === row.id);
    expect(await pending()).toBe(true);
    expect((await jobs().unpublished(T0, 10_000)).some((job) => job.id === row.id)).toBe(false);
    await jobs().markPublished(row.id, T0 + 5);
    expect(await pending()).toBe(false);
    expect((await jobs().byId(row.id))?.published_at).toBe(T0 + 5);
  });

  it("jobs: a job claimed before its published mark is not written for it", async () => {
    const row = await insert({ tenantId: freshTenant(), now: T0 });
    expect((await jobs().claim(row.id, "agt_a", 1, T0 + 1)).ok).toBe(true);
    await jobs().markPublished(row.id, T0 + 5);
    expect(await jobs().byId(row.id)).toMatchObject({ status: "running", published_at: null });
  });

  it("jobs: a silent running job is reclaimed once, unpublished; a heartbeat since wins", async () => {
    const row = await insert({ tenantId: freshTenant() });
    await jobs().markPublished(row.id, T0);
    await jobs().claim(row.id, "agt_a", 1, T0 + 1);
    const stale = await jobs().staleRunning(T0 + 2, 10_000);
    const found = stale.find((job) => job.id === row.id);
    if (!found) throw new Error("the silent job is not listed as stale");
    const reclaimed = await jobs().reclaimStale(found, T0 + 2, TRANSIENT, true, T0 + 3);
    expect(reclaimed).toMatchObject({ ok: true, job: { status: "queued", published_at: null } });
    expect((await jobs().reclaimStale(found, T0 + 2, TRANSIENT, true, T0 + 3)).ok).toBe(false);

    await jobs().claim(row.id, "agt_b", 2, T0 + 4);
    const running = await jobs().byId(row.id);
    await jobs().heartbeat(row.id, 2, T0 + 6);
    expect((await jobs().reclaimStale(running!, T0 + 5, TRANSIENT, false, T0 + 7)).ok).toBe(false);
    const gone = await jobs().reclaimStale(running!, T0 + 7, TRANSIENT, false, T0 + 8);
    expect(gone).toMatchObject({ ok: true, job: { status: "failed", finished_at: T0 + 8 } });
    expect(await jobs().claims(row.id)).toBe(2);
  });

  it("jobs: lists newest first in pages, filtered by status, one tenant only", async () => {
    const tenant = freshTenant();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await insert({ tenantId: tenant, now: T0 + i * 10 })).id);
    await insert({ tenantId: freshTenant(), now: T0 + 100 });
    await jobs().cancel(tenant, ids[1]!, T0 + 50);
    const newest = [...ids].reverse();
    const page1 = await jobs().list(tenant, { limit: 2 });
    expect(page1.map((row) => row.id)).toEqual(newest.slice(0, 2));
    const page2 = await jobs().list(tenant, { limit: 2, before: page1.at(-1)!.id });
    expect(page2.map((row) => row.id)).toEqual(newest.slice(2, 4));
    const page3 = await jobs().list(tenant, { limit: 2, before: page2.at(-1)!.id });
    expect(page3.map((row) => row.id)).toEqual(newest.slice(4));
    const canceled = await jobs().list(tenant, { limit: 10, status: "canceled" });
    expect(canceled.map((row) => row.id)).toEqual([ids[1]]);
  });

  it("jobs: counts queued jobs per tenant and jobs per status", async () => {
    const tenant = freshTenant();
    const before = await jobs().countsByStatus();
    const rows = await Promise.all([0, 1, 2].map(() => insert({ tenantId: tenant })));
    await jobs().cancel(tenant, rows[0]!.id, T0);
    expect(await jobs().queuedCount(tenant)).toBe(2);
    expect(await jobs().queuedCount(freshTenant())).toBe(0);
    const after = await jobs().countsByStatus();
    // Other tests share the database, but none runs at the same time as this one.
    expect((after.get("queued") ?? 0) - (before.get("queued") ?? 0)).toBe(2);
    expect((after.get("canceled") ?? 0) - (before.get("canceled") ?? 0)).toBe(1);
  });
}
