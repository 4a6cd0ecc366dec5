import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import type { JobRow } from "../../gateway/store/job-rows.ts";
import { type SweepOptions, sweep } from "../../gateway/sweep/index.ts";
import type { QueueMessage } from "../../shared/protocol/index.ts";
import { sqlQueueOn } from "../../shared/queue/open/index.ts";
import type { JobQueue } from "../../shared/queue/port.ts";
import { insertJob, sweepGateway } from "../helpers/sweep-gateway.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * `sweep()` with an injected clock, on both databases: the outbox, TTL expiry and stale
 * running jobs. The queue is the real `sql` queue in the same database, wrapped to record
 * publishes and to fail them on demand.
 */
const T0 = 1_750_000_000_000;
const LEASE_S = 10;
const OPTIONS: SweepOptions = { outboxGraceMs: 5_000, staleAfterMs: 15_000, maxAttempts: 3 };

describe.each(["sqlite", "postgres"] as const)("sweep() on %s", (kind) => {
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  let blobDir: string;
  let clock = T0;
  let published: QueueMessage[] = [];
  let publishFails = false;
  let gateway: Gateway;

  const build = (queue: JobQueue): Gateway =>
    sweepGateway({ database, queue, blobDir, now: () => clock, config: { leaseSeconds: LEASE_S } });

  beforeAll(async () => {
    database = await openTestDatabase(kind);
    blobDir = mkdtempSync(join(tmpdir(), "gantry-sweep-"));
    const real = sqlQueueOn(database, { limits: { maxAttempts: 3 } });
    const recording: JobQueue = {
      ...real,
      async publish(message, options) {
        if (publishFails) throw new Error("broker unreachable");
        await real.publish(message, options);
        published.push(message);
      },
      // The outbox pass publishes what it found together (gateway/jobs/publish.ts).
      async publishMany(messages) {
        if (publishFails) throw new Error("broker unreachable");
        await real.publishMany?.(messages);
        published.push(...messages);
      },
    };
    gateway = build(recording);
  });
  afterAll(async () => {
    await gateway?.queue.close();
    await database?.close();
    rmSync(blobDir, { recursive: true, force: true });
  });

  /** A committed job that was never published (the gateway died before the publish). */
  const commit = async (at: number, ttlMs = 3_600_000): Promise<JobRow> => {
    const row = await insertJob(gateway, {
      tenantId: "ten_sweep",
      now: at,
      expiresAt: at + ttlMs,
    });
    return row;
  };
  const statusOf = async (id: string) => (await gateway.stores.jobs.byId(id))?.status;
  const publishedIds = () => published.map((m) => m.id);
  const reset = (at: number) => {
    clock = at;
    published = [];
    publishFails = false;
  };

  it("republishes a committed job once its outbox grace has passed, and only once", async () => {
    reset(T0);
    const job = await commit(T0);
    clock = T0 + 4_000;
    expect((await sweep(gateway, OPTIONS)).republished).toBe(0);
    clock = T0 + 6_000;
    expect((await sweep(gateway, OPTIONS)).republished).toBe(1);
    expect(publishedIds()).toEqual([job.id]);
    expect((await gateway.stores.jobs.byId(job.id))?.published_at).toBe(T0 + 6_000);
    clock = T0 + 20_000;
    await sweep(gateway, OPTIONS);
    expect(publishedIds()).toEqual([job.id]);
  });

  it("keeps a job in the outbox while the queue refuses it, then publishes it", async () => {
    reset(T0 + 100_000);
    const job = await commit(clock);
    clock += 6_000;
    publishFails = true;
    expect((await sweep(gateway, OPTIONS)).republished).toBe(0);
    expect((await gateway.stores.jobs.byId(job.id))?.published_at).toBeNull();
    publishFails = false;
    clock += 5_000;
    expect((await sweep(gateway, OPTIONS)).republished).toBe(1);
    expect(publishedIds()).toEqual([job.id]);
  });

  it("expires a queued job past its TTL, with an event", async () => {
    reset(T0 + 200_000);
    const job = await commit(clock, 1_000);
    await gateway.stores.jobs.markPublished(job.id, clock);
    clock += 2_000;
    expect((await sweep(gateway, OPTIONS)).expired).toBeGreaterThanOrEqual(1);
    expect(await statusOf(job.id)).toBe("expired");
    expect((await gateway.stores.jobs.eventsAfter(job.id, 0)).map((e) => e.status)).toEqual([
      "queued",
      "expired",
    ]);
  });

  it("requeues a running job whose agent went silent, and republishes it", async () => {
    reset(T0 + 300_000);
    const job = await commit(clock);
    await gateway.stores.jobs.markPublished(job.id, clock);
    expect((await gateway.stores.jobs.claim(job.id, "agent-a", 1, clock)).ok).toBe(true);
    clock += 5_000;
    await gateway.stores.jobs.heartbeat(job.id, 1, clock);
    clock += 14_000; // 14 s of silence: within the 15 s allowed
    expect((await sweep(gateway, OPTIONS)).released).toBe(0);
    expect(await statusOf(job.id)).toBe("running");
    clock += 2_000;
    const report = await sweep(gateway, OPTIONS);
    expect(report).toMatchObject({ released: 1, abandoned: 0 });
    const after = await gateway.stores.jobs.byId(job.id);
    expect(after).toMatchObject({ status: "queued", published_at: clock });
    expect(JSON.parse(after?.error ?? "null")).toMatchObject({ code: "agent_lost" });
    // The message says how many attempts were made; the queue holds it for the next agent.
    expect(published).toEqual([expect.objectContaining({ id: job.id, attempt: 1 })]);
    expect((await gateway.queue.depth("noop")).ready).toBeGreaterThanOrEqual(1);
    expect((await gateway.stores.jobs.eventsAfter(job.id, 0)).map((e) => e.status)).toEqual([
      "queued",
      "running",
      "queued",
    ]);
  });

  it("makes the duplicate harmless: the original redelivery and the republished copy cannot both run", async () => {
    reset(T0 + 400_000);
    const job = await commit(clock);
    expect((await gateway.stores.jobs.claim(job.id, "agent-a", 1, clock)).ok).toBe(true);
    clock += 20_000;
    expect((await sweep(gateway, OPTIONS)).released).toBe(1);
    // The queue gives the original back (delivery 2) and delivers the republished copy (1).
    const original = await gateway.stores.jobs.claim(job.id, "agent-b", 2, clock + 1);
    const copy = await gateway.stores.jobs.claim(job.id, "agent-c", 1, clock + 2);
    expect(original.ok).toBe(true);
    expect(copy.ok).toBe(false);
    expect((await gateway.stores.jobs.succeed(job.id, 2, { done: true }, clock + 3)).ok).toBe(true);
    const events = await gateway.stores.jobs.eventsAfter(job.id, 0);
    expect(events.filter((e) => e.status === "succeeded")).toHaveLength(1);
  });

  it("fails a silent running job that was already claimed maxAttempts times", async () => {
    reset(T0 + 500_000);
    const job = await commit(clock);
    for (let attempt = 1; attempt <= 3; attempt++) {
      expect((await gateway.stores.jobs.claim(job.id, "agent-a", attempt, clock)).ok).toBe(true);
      clock += 1_000;
    }
    clock += 20_000;
    const report = await sweep(gateway, OPTIONS);
    expect(report).toMatchObject({ released: 0, abandoned: 1 });
    const after = await gateway.stores.jobs.byId(job.id);
    expect(after?.status).toBe("failed");
    expect(after?.finished_at).toBe(clock);
    expect(JSON.parse(after?.error ?? "null")).toMatchObject({
      type: "transient",
      code: "agent_lost",
    });
    expect(publishedIds()).toEqual([]);
  });

  it("counts only spent attempts: claims a draining agent gave back unspent do not fail the job", async () => {
    reset(T0 + 550_000);
    const job = await commit(clock);
    const jobs = gateway.stores.jobs;
    // Three agents drained (a deploy) with the job read ahead: each claim was released and
    // its message given back, still at delivery 1 (give_back); the fourth agent went silent.
    for (const agent of ["agent-a", "agent-b", "agent-c"]) {
      expect((await jobs.claim(job.id, agent, 1, clock)).ok).toBe(true);
      expect((await jobs.release(job.id, 1, clock, agent)).ok).toBe(true);
      clock += 1_000;
    }
    expect((await jobs.claim(job.id, "agent-d", 1, clock)).ok).toBe(true);
    expect(await jobs.claims(job.id)).toBe(1);
    clock += 20_000;
    expect(await sweep(gateway, OPTIONS)).toMatchObject({ released: 1, abandoned: 0 });
    expect(await statusOf(job.id)).toBe("queued");
  });

  it("leaves canceled and finished jobs alone", async () => {
    reset(T0 + 600_000);
    const canceled = await commit(clock);
    await gateway.stores.jobs.claim(canceled.id, "agent-a", 1, clock);
    await gateway.stores.jobs.cancel("ten_sweep", canceled.id, clock);
    const done = await commit(clock);
    await gateway.stores.jobs.claim(done.id, "agent-a", 1, clock);
    await gateway.stores.jobs.succeed(done.id, 1, {}, clock);
    clock += 60_000;
    const report = await sweep(gateway, OPTIONS);
    expect(report).toMatchObject({ released: 0, abandoned: 0 });
    expect(await statusOf(canceled.id)).toBe("canceled");
    expect(await statusOf(done.id)).toBe("succeeded");
  });

  it("releases a stale job once when two gateways sweep at the same moment", async () => {
    reset(T0 + 700_000);
    const job = await commit(clock);
    await gateway.stores.jobs.markPublished(job.id, clock);
    await gateway.stores.jobs.claim(job.id, "agent-a", 1, clock);
    clock += 20_000;
    const other = build(gateway.queue);
    const reports = await Promise.all([sweep(gateway, OPTIONS), sweep(other, OPTIONS)]);
    expect(reports[0].released + reports[1].released).toBe(1);
    const statuses = (await gateway.stores.jobs.eventsAfter(job.id, 0)).map((e) => e.status);
    expect(statuses).toEqual(["queued", "running", "queued"]);
  });
});
