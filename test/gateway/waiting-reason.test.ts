import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { feedWaiting } from "../../gateway/feed/feed-waiting.ts";
import { jobView, listedJobs } from "../../gateway/jobs/job-view.ts";
import { forgetSwitches } from "../../gateway/jobs/model-switches.ts";
import { releaseModel } from "../../gateway/jobs/release.ts";
import { submitJob } from "../../gateway/jobs/submit.ts";
import type { TenantEventRow } from "../../gateway/store/tenant-events.ts";
import type { Tenant } from "../../gateway/store/tenants.ts";
import type { OpenedDatabase } from "../../shared/db/open.ts";
import { randomToken } from "../../shared/ids.ts";
import { AGENT_LOST_CODE, retryCeilingMs } from "../../shared/job-retry.ts";
import type { Job, JobEvent } from "../../shared/protocol/index.ts";
import { proTenant } from "../helpers/pro-tenant.ts";
import { readSse } from "../helpers/sse.ts";
import { releaseTestGateway } from "../helpers/sweep-gateway.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * `waiting_reason` and `waiting_detail` on queued jobs (issue 26 #3): each reason from the
 * state the store holds, on GET /v1/jobs/{id}'s view and in listings.
 */
describe("why a queued job waits", () => {
  let rig: Awaited<ReturnType<typeof releaseTestGateway>>;
  let database: OpenedDatabase;
  let gateway: Gateway;
  let clock = Date.now();

  beforeAll(async () => {
    // No memory of readings between steps: each step sees the store as it is.
    rig = await releaseTestGateway(() => clock, { releaseWindow: 10, queueDepthCacheMs: 0 });
    ({ database, gateway } = rig);
  });
  afterAll(() => rig?.close());

  const tenant = async (limits: Record<string, number> = {}): Promise<Tenant> => {
    const id = `ten_w${randomToken(6).replace(/[^a-z0-9]/gi, "x")}`;
    return (await proTenant(database.db, id, limits)).tenant;
  };
  // Ids sort by creation time: each submit a millisecond after the last.
  const submit = async (of: Tenant) => {
    clock++;
    const request = { model: "noop", input: {} };
    const options = { idempotencyKey: null, traceparent: null };
    const { job } = await submitJob(gateway, of, request, options);
    // The submit's release pass runs in the background: let it finish first.
    await releaseModel(gateway, "noop");
    return job;
  };
  const view = async (id: string) => {
    const row = await gateway.stores.jobs.byId(id);
    if (!row) throw new Error("no job");
    return jobView(gateway, row);
  };

  it("names each reason, from the model's switch to the tenant's limit and the fleet", async () => {
    const one = await tenant({ max_running_jobs: 1 });
    const first = await submit(one);
    const second = await submit(one);
    expect(await view(first.id)).toMatchObject({ waiting_reason: "no_agent_for_model" });
    // The first is released and counts against max_running_jobs 1: the second is held.
    const held = await view(second.id);
    expect(held).toMatchObject({ waiting_reason: "tenant_concurrency_limit" });
    expect(held.waiting_detail).toContain("max_running_jobs is 1");

    const { row: agent } = await gateway.stores.agents.create({ source: "admin", now: clock });
    await gateway.stores.agents.register(
      agent.id,
      { v: 1, models: ["noop"], provider: "cpu", slots: 1, heartbeat_interval_seconds: 5 },
      clock,
    );
    const other = await tenant();
    const third = await submit(other);
    // A live agent serves noop; the first job is ahead of the third.
    const behind = await view(third.id);
    expect(behind).toMatchObject({ waiting_reason: "behind_jobs" });
    expect(behind.queue_position).toBeGreaterThan(1);
    // Next in line, and the agent's one slot is free: it is about to start.
    const starting = await view(first.id);
    expect(starting).toMatchObject({ waiting_reason: "starting" });
    expect(starting.waiting_detail).toBe(
      "It is next; the 1 agent serving noop has a free slot and takes it in a moment.",
    );
    // Its heartbeat says the slot is busy (with another model's job, say): it waits for it.
    await gateway.stores.agents.heartbeat(agent.id, { slots_busy: 1 }, clock);
    expect(await view(first.id)).toMatchObject({ waiting_reason: "agents_busy" });
    await gateway.stores.agents.heartbeat(agent.id, { slots_busy: 0 }, clock);
    // A running job of the model fills it too, before any heartbeat says so.
    const running = await submit(await tenant());
    expect((await gateway.stores.jobs.claim(running.id, agent.id, 1, clock)).ok).toBe(true);
    expect(await view(first.id)).toMatchObject({ waiting_reason: "agents_busy" });
    const [listed] = await listedJobs(gateway, [(await gateway.stores.jobs.byId(third.id))!]);
    expect(listed).toMatchObject({
      waiting_reason: "behind_jobs",
      queue_position: behind.queue_position,
    });

    // The agent stops heartbeating: three missed beats and it is gone.
    clock += 60_000;
    expect(await view(third.id)).toMatchObject({ waiting_reason: "agents_unhealthy" });

    await gateway.stores.jobs.pauseModel("noop", { rejectNew: false, reason: "upgrade" }, clock);
    forgetSwitches(gateway);
    const paused = await view(third.id);
    expect(paused).toMatchObject({ waiting_reason: "model_paused" });
    expect(paused.waiting_detail).toContain("upgrade");
    await gateway.stores.jobs.resumeModel("noop", clock);
    forgetSwitches(gateway);
  });

  it("a retried attempt waits out its backoff", async () => {
    const one = await tenant();
    const job = await submit(one);
    const claimed = await gateway.stores.jobs.claim(job.id, "agt_x", 1, clock);
    expect(claimed.ok).toBe(true);
    const error = { type: "transient" as const, code: "oom", message: "out of memory" };
    await gateway.stores.jobs.fail(job.id, 1, error, true, clock);
    const waiting = await view(job.id);
    expect(waiting).toMatchObject({ waiting_reason: "delayed" });
    expect(waiting.waiting_detail).toContain("oom");
    // The tenant's feed says the same of the `queued` event the failure made.
    const events = await gateway.stores.jobs.eventsAfter(job.id, 0);
    const requeued = events.at(-1);
    expect(requeued?.status).toBe("queued");
    const row = { ...requeued, model: "noop" } as unknown as TenantEventRow;
    expect(await feedWaiting(gateway, one.id, row)).toMatchObject({ waiting_reason: "delayed" });
  });

  it("a retry is delayed only for its backoff, and a lost agent's job not at all", async () => {
    const one = await tenant();
    const failed = await submit(one);
    expect((await gateway.stores.jobs.claim(failed.id, "agt_y", 1, clock)).ok).toBe(true);
    const error = { type: "transient" as const, code: "oom", message: "out of memory" };
    await gateway.stores.jobs.fail(failed.id, 1, error, true, clock);
    expect(await view(failed.id)).toMatchObject({ waiting_reason: "delayed" });
    // Attempt 1's retry waits at most its backoff's ceiling: past it, the fleet is the reason
    // (here the agent of the first test, gone since).
    clock += retryCeilingMs(1);
    expect(await view(failed.id)).toMatchObject({ waiting_reason: "agents_unhealthy" });

    // The sweeper takes a silent agent's job back and publishes it again at once.
    const lost = await submit(one);
    expect((await gateway.stores.jobs.claim(lost.id, "agt_y", 1, clock)).ok).toBe(true);
    const running = await gateway.stores.jobs.byId(lost.id);
    const silent = { type: "transient" as const, code: AGENT_LOST_CODE, message: "silent" };
    clock += 1;
    const requeued = await gateway.stores.jobs.reclaimStale(running!, clock, silent, true, clock);
    expect(requeued.ok).toBe(true);
    expect(await view(lost.id)).toMatchObject({ waiting_reason: "agents_unhealthy" });
    const event = (await gateway.stores.jobs.eventsAfter(lost.id, 0)).at(-1);
    const row = { ...event, model: "noop" } as unknown as TenantEventRow;
    expect(await feedWaiting(gateway, one.id, row)).toMatchObject({
      waiting_reason: "agents_unhealthy",
    });
  });

  it("a queued job's event stream says why it waits", async () => {
    const gw = await startTestGateway({ models: ["noop"] });
    try {
      const submitted = await gw.api("/v1/jobs", {
        method: "POST",
        json: { model: "noop", input: {} },
      });
      const { id } = (await submitted.json()) as { id: string };
      const listed = (await (await gw.api("/v1/jobs")).json()) as { data: Job[] };
      expect(listed.data.find((job) => job.id === id)).toMatchObject({
        waiting_reason: "no_agent_for_model",
      });
      const controller = new AbortController();
      const response = await gw.api(`/v1/jobs/${id}/events`, { signal: controller.signal });
      let first: JobEvent | null = null;
      await readSse(response, ({ event, data }) => {
        if (event !== "status" || first) return;
        first = JSON.parse(data) as JobEvent;
        controller.abort();
      }).catch((error: unknown) => {
        if (!controller.signal.aborted) throw error;
      });
      expect(first).toMatchObject({ status: "queued", waiting_reason: "no_agent_for_model" });
    } finally {
      await gw.close();
    }
  });

  it("the tenant's feed says why each job it sees queued waits", async () => {
    const gw = await startTestGateway({ models: ["noop"] });
    try {
      const controller = new AbortController();
      const response = await gw.api("/v1/events", { signal: controller.signal });
      const queued: (JobEvent & { model: string })[] = [];
      const reading = readSse(response, ({ event, data }) => {
        if (event === "ready") {
          // The stream is open: these two jobs' events are live ones.
          for (const n of [1, 2]) {
            void gw.api("/v1/jobs", { method: "POST", json: { model: "noop", input: { n } } });
          }
        }
        if (event !== "status") return;
        const parsed = JSON.parse(data) as JobEvent & { model: string };
        if (parsed.status === "queued") queued.push(parsed);
        if (queued.length === 2) controller.abort();
      }).catch((error: unknown) => {
        if (!controller.signal.aborted) throw error;
      });
      await reading;
      expect(queued).toHaveLength(2);
      for (const event of queued) {
        expect(event).toMatchObject({ model: "noop", waiting_reason: "no_agent_for_model" });
        expect(event.waiting_detail).toContain("noop");
      }
    } finally {
      await gw.close();
    }
  });
});
