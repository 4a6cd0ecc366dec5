import { describe, expect, it } from "vitest";
import type { RunResult } from "../../gpu-agent/inference/types.ts";
import { newId } from "../../shared/ids.ts";
import { EMPTY_DEPTH, harnessPerTest } from "../helpers/agent-harness.ts";
import { createFakeRunner, echo } from "../helpers/fake-runner.ts";

const start = harnessPerTest();

describe("gpu-agent supervisor failures", () => {
  it("dead-letters a permanent error at once, without a retry", async () => {
    const h = await start({ runners: [createFakeRunner()] });
    const id = h.gateway.addJob({ input: { fail: "permanent" } }).job.id;

    await h.queue.publish(h.gateway.message(id));
    const settled = await h.settled(id);

    expect(settled.outcome).toBe("dead-lettered");
    expect(h.gateway.events(id)).toEqual([
      expect.objectContaining({
        type: "failed",
        attempt: 1,
        will_retry: false,
        error: expect.objectContaining({ type: "permanent", code: "noop_permanent" }),
      }),
    ]);
    expect(h.gateway.calls.filter((c) => c.kind === "claim")).toHaveLength(1);
    const dead = await h.sql.deadLetters();
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ attempts: 1, error: { code: "noop_permanent" } });
  });

  it("retries a transient error, reporting will_retry, and succeeds on the next attempt", async () => {
    let calls = 0;
    const runner = createFakeRunner((request) =>
      ++calls === 1
        ? { ok: false, error: { type: "transient", code: "cuda_oom", message: "out of memory" } }
        : echo(request),
    );
    const h = await start({ runners: [runner] });
    const id = h.gateway.addJob({ input: { n: 1 } }).job.id;

    await h.queue.publish(h.gateway.message(id));
    expect((await h.settled(id, 1)).outcome).toBe("retried");
    expect((await h.settled(id, 2)).outcome).toBe("succeeded");

    const events = h.gateway.events(id);
    expect(events.map((e) => [e.type, e.attempt])).toEqual([
      ["failed", 1],
      ["succeeded", 2],
    ]);
    expect(events[0]).toMatchObject({ will_retry: true, error: { code: "cuda_oom" } });
    expect(h.gateway.calls.filter((c) => c.kind === "claim").map((c) => c.body)).toEqual([
      expect.objectContaining({ attempt: 1 }),
      expect.objectContaining({ attempt: 2 }),
    ]);
    expect(await h.sql.depth()).toEqual(EMPTY_DEPTH);
  });

  it("reports will_retry false and dead-letters when the last attempt fails transiently", async () => {
    const h = await start({ runners: [createFakeRunner()], config: { maxAttempts: 2 } });
    const id = h.gateway.addJob({ input: { fail: "transient" } }).job.id;

    await h.queue.publish(h.gateway.message(id));
    expect((await h.settled(id, 2)).outcome).toBe("dead-lettered");

    expect(h.gateway.events(id).map((e) => e.type === "failed" && e.will_retry)).toEqual([
      true,
      false,
    ]);
    expect(await h.sql.deadLetters()).toEqual([
      expect.objectContaining({
        attempts: 2,
        error: expect.objectContaining({ code: "noop_transient" }),
      }),
    ]);
  });

  it("fails an input the presigned URL refuses (4xx) permanently, and retries a 5xx", async () => {
    const runner = createFakeRunner();
    const h = await start({ runners: [runner] });
    const files = { image: { bytes: new Uint8Array([9]), contentType: "image/png" } };
    const gone = h.gateway.addJob({ input: { image: newId("upl") }, files });
    gone.inputStatus = 403;
    const flaky = h.gateway.addJob({ input: { image: newId("upl") }, files });
    flaky.inputStatus = 503;
    h.gateway.onEvent = (jobId) => {
      // The storage recovers once the first failure is reported.
      if (jobId === flaky.job.id) flaky.inputStatus = undefined;
    };

    await h.queue.publish(h.gateway.message(gone.job.id));
    expect((await h.settled(gone.job.id)).outcome).toBe("dead-lettered");
    expect(h.gateway.events(gone.job.id)[0]).toMatchObject({
      error: { type: "permanent", code: "input_unavailable" },
    });
    // The error names the input, never the presigned URL and its signature.
    expect(JSON.stringify(h.gateway.events(gone.job.id))).not.toContain("sig=");

    await h.queue.publish(h.gateway.message(flaky.job.id));
    expect((await h.settled(flaky.job.id, 1)).outcome).toBe("retried");
    expect((await h.settled(flaky.job.id, 2)).outcome).toBe("succeeded");
    expect(runner.requests.map((r) => r.jobId)).toEqual([flaky.job.id]);
  });

  it("fails an input over the size limit permanently", async () => {
    const h = await start({ runners: [createFakeRunner()], config: { maxInputBytes: 8 } });
    const big = { image: { bytes: new Uint8Array(64), contentType: "image/png" } };
    const id = h.gateway.addJob({ input: { image: newId("upl") }, files: big }).job.id;

    await h.queue.publish(h.gateway.message(id));

    expect(await h.settled(id)).toMatchObject({
      outcome: "dead-lettered",
      error: { code: "input_too_large" },
    });
  });

  it("fails an output larger than the claim's max_output_bytes permanently, saying so", async () => {
    const h = await start({ runners: [createFakeRunner()] });
    const small = h.gateway.addJob({ input: { text: "fits" } });
    small.maxOutputBytes = 256;
    const large = h.gateway.addJob({ input: { text: "x".repeat(300) } });
    large.maxOutputBytes = 256;

    await h.queue.publish(h.gateway.message(small.job.id));
    await h.queue.publish(h.gateway.message(large.job.id));

    expect(await h.settled(small.job.id)).toMatchObject({ outcome: "succeeded" });
    expect(await h.settled(large.job.id)).toMatchObject({
      outcome: "dead-lettered",
      error: { type: "permanent", code: "output_too_large" },
    });
    // The gateway hears a small `failed` report, not a `succeeded` one it would refuse.
    expect(h.gateway.events(large.job.id)).toEqual([
      expect.objectContaining({
        type: "failed",
        will_retry: false,
        error: expect.objectContaining({ message: expect.stringMatching(/at most 256/) }),
      }),
    ]);
  });

  it("rides out a gateway that answers 503 a few times", async () => {
    const h = await start({ runners: [createFakeRunner()], gatewayTries: 3 });
    const id = h.gateway.addJob().job.id;
    h.gateway.failNext("claim", 2);

    await h.queue.publish(h.gateway.message(id));

    expect(await h.settled(id)).toMatchObject({ attempt: 1, outcome: "succeeded" });
    expect(h.gateway.calls.filter((c) => c.kind === "claim").map((c) => c.status)).toEqual([
      503, 503, 200,
    ]);
  });

  it("holds a finished result while the gateway is down and reports it once it answers: one run", async () => {
    const runner = createFakeRunner();
    const h = await start({ runners: [runner], gatewayTries: 2 });
    const id = h.gateway.addJob().job.id;
    h.gateway.failNext("event", 6); // three rounds of two tries each cannot record the result

    await h.queue.publish(h.gateway.message(id));

    const holds = await h.waitForEvent(
      (e) => e.type === "holding" && e.jobId === id && e.call === "report" && e.round === 3,
    );
    expect(holds).toMatchObject({ attempt: 1 });
    expect(await h.settled(id)).toMatchObject({ attempt: 1, outcome: "succeeded" });
    expect(h.gateway.events(id).map((e) => [e.type, e.attempt])).toEqual([["succeeded", 1]]);
    expect(runner.requests.map((r) => r.jobId)).toEqual([id]);
    expect(h.events.filter((e) => e.type === "settled")).toHaveLength(1);
    expect(await h.sql.depth()).toEqual(EMPTY_DEPTH);
  });

  it("holds the claim while the gateway is down, even on the last attempt: never dead-lettered for it", async () => {
    const h = await start({
      runners: [createFakeRunner()],
      gatewayTries: 1,
      config: { maxAttempts: 1 },
    });
    const id = h.gateway.addJob().job.id;
    h.gateway.failNext("claim", 3);

    await h.queue.publish(h.gateway.message(id));

    expect(await h.settled(id)).toMatchObject({ attempt: 1, outcome: "succeeded" });
    expect(
      h.events.filter((e) => e.type === "holding").map((e) => e.type === "holding" && e.call),
    ).toEqual(["claim", "claim", "claim"]);
    expect(await h.sql.deadLetters()).toEqual([]);
  });

  it("turns a runner that throws into a transient failure", async () => {
    let calls = 0;
    const runner = createFakeRunner((request): RunResult => {
      if (++calls === 1) throw new Error("ipc channel closed");
      return echo(request);
    });
    const h = await start({ runners: [runner] });
    const id = h.gateway.addJob().job.id;

    await h.queue.publish(h.gateway.message(id));

    expect(await h.settled(id, 1)).toMatchObject({
      outcome: "retried",
      error: { type: "transient", code: "agent_error" },
    });
    expect(await h.settled(id, 2)).toMatchObject({ outcome: "succeeded" });
  });
});
