/**
 * The batch window adapts to the arrival rate: at low load a job waits for no one, under
 * load a batch waits only as long as filling it should take, and with no arrivals known the
 * configured window applies as before.
 */
import { describe, expect, it } from "vitest";
import { WaitingQueue, type WaitingRequest } from "../gpu-agent/batching/waiting-queue.ts";
import type { RunRequest } from "../gpu-agent/inference/types.ts";
import { createRunnerPool } from "../gpu-agent/runner/pool.ts";
import type { BatchPolicy, Runner } from "../gpu-agent/runner/types.ts";

const request = (n: number): RunRequest => ({
  jobId: `job_${n}`,
  model: "a",
  files: {},
  params: { n },
});
const waiting = (n: number, enqueuedAt: number): WaitingRequest => ({
  request: request(n),
  enqueuedAt,
  solo: false,
  batchCap: Number.POSITIVE_INFINITY,
});
const policy = (): BatchPolicy => ({ maxBatch: 8, windowMs: 10 });

describe("adaptive batch window", () => {
  it("runs at once when requests arrive further apart than the window", () => {
    const queue = new WaitingQueue();
    for (const at of [0, 50, 100]) queue.arrived("a", at, 10);
    queue.add(waiting(1, 100));
    const next = queue.next(policy, 100);
    expect(next.kind).toBe("run");
  });

  it("waits only as long as filling the batch should take under load", () => {
    const queue = new WaitingQueue();
    for (const at of [0, 1, 2, 3, 4, 5]) queue.arrived("a", at, 10);
    for (const [n, at] of [
      [1, 3],
      [2, 4],
      [3, 5],
    ] as const)
      queue.add(waiting(n, at));
    // A gap of 1 ms: it waits while they keep coming (two gaps after the last and a ms),
    // not the whole ten.
    expect(queue.next(policy, 5)).toEqual({ kind: "wait", until: 8 });
    queue.arrived("a", 6, 10);
    queue.add(waiting(4, 6));
    expect(queue.next(policy, 6)).toEqual({ kind: "wait", until: 9 });
  });

  it("keeps the configured window until arrivals are known", () => {
    const queue = new WaitingQueue();
    queue.arrived("a", 100, 10);
    queue.add(waiting(1, 100));
    expect(queue.next(policy, 101)).toEqual({ kind: "wait", until: 110 });
  });

  it("lets a burst that lands together fill one batch", () => {
    const queue = new WaitingQueue();
    for (let n = 1; n <= 3; n++) {
      queue.arrived("a", 7, 10);
      queue.add(waiting(n, 7));
    }
    expect(queue.next(policy, 7)).toEqual({ kind: "wait", until: 8 });
  });

  it("in the pool, sends sparse jobs to an idle runner without waiting out the window", async () => {
    let clock = 0;
    const batches: number[][] = [];
    const runner: Runner = {
      provider: "cpu",
      pid: 1,
      restarts: 0,
      async start() {},
      async stop() {},
      async run(one) {
        return (await runner.runBatch!([one]))[0]!;
      },
      async runBatch(batch) {
        batches.push(batch.map((r) => r.params.n as number));
        return batch.map((r) => ({ ok: true, output: r.params }));
      },
      batching: () => ({ maxBatch: 8, windowMs: 5 }),
    };
    const pool = createRunnerPool([runner], () => clock);
    for (let n = 1; n <= 4; n++) {
      clock = n * 120_000;
      const result = pool.run(request(n));
      // The first waits out its window (the pool's timer reads this clock). From the second
      // on, the gaps are known to be longer than the window: they run with the clock
      // standing still, which a job waiting for its window never would.
      if (n === 1) clock += 10;
      expect(await result).toEqual({ ok: true, output: { n } });
    }
    expect(batches).toEqual([[1], [2], [3], [4]]);
  });
});
