import { describe, expect, it } from "vitest";
import { createChildRunner } from "../../gpu-agent/runner/child-runner.ts";
import { newId } from "../../shared/ids.ts";
import type { QueueDepth } from "../../shared/queue/port.ts";
import {
  EMPTY_DEPTH,
  harnessPerTest,
  holdingRuns,
  silentLogger,
} from "../helpers/agent-harness.ts";
import { createFakeRunner, echo } from "../helpers/fake-runner.ts";

const start = harnessPerTest();

describe("gpu-agent supervisor", () => {
  it("claims, downloads, runs, reports succeeded with the output, then acks", async () => {
    const runner = createFakeRunner();
    const h = await start({ runners: [runner] });
    const stub = h.gateway.addJob({
      input: { image: newId("upl"), lang: "en" },
      files: { image: { bytes: new Uint8Array([1, 2, 3]), contentType: "image/png" } },
    });
    const id = stub.job.id;
    let depthAtReport: QueueDepth | undefined;
    h.gateway.onEvent = async () => {
      depthAtReport = await h.sql.depth();
    };

    await h.queue.publish(h.gateway.message(id));
    const settled = await h.settled(id);

    expect(settled.outcome).toBe("succeeded");
    expect(runner.requests).toHaveLength(1);
    expect(runner.requests[0]).toMatchObject({ jobId: id, model: "noop", params: { lang: "en" } });
    expect(runner.requests[0]?.files.image?.contentType).toBe("image/png");
    expect([...(runner.requests[0]?.files.image?.bytes ?? [])]).toEqual([1, 2, 3]);
    const output = { params: { lang: "en" }, files: { image: 3 } };
    expect(h.gateway.events(id)).toEqual([
      { v: 1, type: "succeeded", agent_id: "test-agent-1", attempt: 1, output },
    ]);
    expect(h.gateway.calls.filter((c) => c.jobId === id).map((c) => c.kind)).toEqual([
      "claim",
      "download",
      "event",
    ]);
    // The message was still held when the gateway recorded the result: ack came after.
    expect(depthAtReport?.inFlight).toBe(1);
    expect(await h.sql.depth()).toEqual(EMPTY_DEPTH);
  });

  it("never holds more deliveries than its slots plus the look-ahead", async () => {
    const { held, behaviour } = holdingRuns();
    let runs = 0;
    // The first two runs are held so both slots are busy at once; later ones run through.
    const runner = () =>
      createFakeRunner((request) => (++runs <= 2 ? behaviour(request) : echo(request)));
    const runners = [runner(), runner()];
    const h = await start({ runners });
    const ids = Array.from({ length: 5 }, () => h.gateway.addJob().job.id);
    for (const id of ids) await h.queue.publish(h.gateway.message(id));

    let running = 0;
    await h.waitForEvent((e) => e.type === "running" && ++running === 2);
    expect(held).toHaveLength(2);
    // Two slots, each with one job read ahead (claimed and downloaded) behind it.
    let claims = 0;
    await h.gateway.waitFor((c) => c.kind === "claim" && ++claims === 4);
    expect(h.queue.unsettled).toBe(4);
    expect(h.supervisor.status()).toMatchObject({ slots: 2, busy: 2, state: "running" });
    for (const run of held) run.release();
    await Promise.all(ids.map((id) => h.settled(id)));

    expect(h.queue.maxUnsettled).toBe(4);
    expect(runners.map((r) => r.maxActive)).toEqual([1, 1]);
    expect(h.gateway.calls.filter((c) => c.kind === "claim")).toHaveLength(5);
    expect(h.events.filter((e) => e.type === "settled").map((e) => e.outcome)).toEqual(
      Array(5).fill("succeeded"),
    );
  });

  it.each([
    ["job_canceled", 409],
    ["job_expired", 409],
    ["stale_attempt", 409],
  ])("acks without running when the claim is refused with %s", async (code, status) => {
    const runner = createFakeRunner();
    const h = await start({ runners: [runner] });
    const stub = h.gateway.addJob();
    stub.claimProblem = { status, code };

    await h.queue.publish(h.gateway.message(stub.job.id));
    const settled = await h.settled(stub.job.id);

    expect(settled.outcome).toBe("refused");
    expect(runner.requests).toHaveLength(0);
    expect(h.gateway.events(stub.job.id)).toEqual([]);
    expect(await h.sql.depth()).toEqual(EMPTY_DEPTH);
  });

  it("acks a message for a job the gateway does not know", async () => {
    const runner = createFakeRunner();
    const h = await start({ runners: [runner] });
    const ghost = h.gateway.addJob();
    const message = h.gateway.message(ghost.job.id);
    h.gateway.jobs.delete(ghost.job.id);

    await h.queue.publish(message);

    expect((await h.settled(ghost.job.id)).outcome).toBe("refused");
    expect(runner.requests).toHaveLength(0);
    expect(await h.sql.depth()).toEqual(EMPTY_DEPTH);
  });

  it("heartbeats extend the lease: a run longer than the lease is not redelivered", async () => {
    const { held, behaviour } = holdingRuns();
    // Two slots, so a redelivery after a lost lease would have somewhere to go.
    const runners = [createFakeRunner(behaviour), createFakeRunner(behaviour)];
    const h = await start({ runners, config: { leaseMs: 400, heartbeatIntervalMs: 50 } });
    const id = h.gateway.addJob().job.id;

    await h.queue.publish(h.gateway.message(id));
    let beats = 0;
    // 20 beats of 50 ms: the run outlives its 400 ms lease more than twice over.
    await h.waitForEvent((e) => e.type === "heartbeat" && e.jobId === id && ++beats >= 20);
    expect(h.supervisor.status().inFlight).toEqual([
      expect.objectContaining({ jobId: id, phase: "running", attempt: 1 }),
    ]);
    held[0]?.release();

    expect(await h.settled(id)).toMatchObject({ attempt: 1, outcome: "succeeded" });
    expect(held).toHaveLength(1);
    expect(h.gateway.calls.filter((c) => c.kind === "claim")).toHaveLength(1);
    const heartbeats = h.gateway.calls.filter((c) => c.kind === "heartbeat");
    expect(heartbeats.length).toBeGreaterThanOrEqual(15);
    expect(heartbeats[0]?.body).toEqual({ v: 1, agent_id: "test-agent-1", attempt: 1 });
    expect(await h.sql.depth()).toEqual(EMPTY_DEPTH);
  });

  it("drain finishes in-flight work and takes no new work", async () => {
    const { held, behaviour } = holdingRuns();
    const runners = [createFakeRunner(behaviour), createFakeRunner(behaviour)];
    const h = await start({ runners });
    const first = h.gateway.addJob().job.id;
    const later = h.gateway.addJob().job.id;

    await h.queue.publish(h.gateway.message(first));
    await h.waitForEvent((e) => e.type === "running" && e.jobId === first);
    const drained = h.supervisor.drain();
    expect(h.supervisor.status().state).toBe("draining");
    await h.queue.publish(h.gateway.message(later));
    held[0]?.release();
    await drained;

    expect(await h.settled(first)).toMatchObject({ outcome: "succeeded" });
    expect(h.supervisor.status().state).toBe("stopped");
    expect(h.gateway.calls.filter((c) => c.jobId === later)).toEqual([]);
    expect(await h.sql.depth()).toEqual({ ...EMPTY_DEPTH, ready: 1 });
  });

  it("at the drain deadline releases unfinished jobs to another agent", async () => {
    const { held, behaviour } = holdingRuns();
    const h = await start({
      runners: [createFakeRunner(behaviour)],
      config: { drainTimeoutMs: 100 },
    });
    const id = h.gateway.addJob().job.id;

    await h.queue.publish(h.gateway.message(id));
    await h.waitForEvent((e) => e.type === "running" && e.jobId === id);
    await h.supervisor.drain();

    expect(await h.settled(id, 1)).toMatchObject({ outcome: "released" });
    expect(h.gateway.events(id)).toEqual([
      expect.objectContaining({ type: "released", attempt: 1 }),
    ]);
    // The stopped runner's run ends now; its result must not be reported or uploaded.
    held[0]?.release();

    const other = await h.addSupervisor([createFakeRunner()]);
    expect(await h.settled(id, 2)).toMatchObject({ outcome: "succeeded" });
    expect(other.events).toContainEqual(expect.objectContaining({ type: "settled", attempt: 2 }));
    expect(h.gateway.events(id).map((e) => [e.type, e.attempt])).toEqual([
      ["released", 1],
      ["succeeded", 2],
    ]);
  });
});

describe("gpu-agent supervisor with the real child runner", () => {
  it("retries a job whose runner was killed mid-run, and the retry succeeds", async () => {
    const runner = createChildRunner({
      models: ["noop"],
      threads: 1,
      providers: ["cpu"],
      logger: silentLogger,
      restartDelayMs: 10,
    });
    const h = await start({ runners: [runner] });
    const stub = h.gateway.addJob({ input: { delay_ms: 30_000, tag: "crash" } });
    const id = stub.job.id;

    await h.queue.publish(h.gateway.message(id));
    const running = await h.waitForEvent((e) => e.type === "running" && e.jobId === id);
    const pid = running.type === "running" ? running.pid : null;
    expect(pid).toBeGreaterThan(0);
    // The next attempt need not wait out the delay.
    stub.job = { ...stub.job, input: { tag: "crash" } };
    process.kill(pid ?? 0, "SIGKILL");

    expect(await h.settled(id, 1)).toMatchObject({
      outcome: "retried",
      error: { type: "transient", code: "runner_crashed" },
    });
    expect(await h.settled(id, 2)).toMatchObject({ outcome: "succeeded" });
    expect(h.gateway.events(id)).toEqual([
      expect.objectContaining({ type: "failed", attempt: 1, will_retry: true }),
      expect.objectContaining({ type: "succeeded", attempt: 2, output: { tag: "crash" } }),
    ]);
    expect(runner.restarts).toBeGreaterThanOrEqual(1);
    expect(runner.pid).not.toBe(pid);
  });
});
