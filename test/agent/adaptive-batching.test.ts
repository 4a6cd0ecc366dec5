/**
 * The batch window adapts to the arrival rate: at low load a job waits for no one, under
 * load a batch waits while jobs keep coming at their pace (up to the window), and until a
 * few arrivals are known the configured window applies as before.
 */
import { describe, expect, it } from "vitest";
import { WaitingQueue, type WaitingRequest } from "../../gpu-agent/batching/waiting-queue.ts";
import type { RunRequest } from "../../gpu-agent/inference/types.ts";
import { createRunnerPool } from "../../gpu-agent/runner/pool.ts";
import type { BatchPolicy, Runner } from "../../gpu-agent/runner/types.ts";

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
/** Arrivals at `0, gap, 2 gap, …`, `count` of them; returns the last one's time. */
const arrive = (queue: WaitingQueue, count: number, gap: number) => {
  for (let i = 0; i < count; i++) queue.arrived("a", i * gap, 10);
  return (count - 1) * gap;
};

describe("adaptive batch window", () => {
  it("runs at once when requests arrive further apart than the window", () => {
    const queue = new WaitingQueue();
    const last = arrive(queue, 10, 50);
    queue.add(waiting(1, last));
    expect(queue.next(policy, last).kind).toBe("run");
  });

  it("under load, waits while requests keep coming, not always the whole window", () => {
    const queue = new WaitingQueue();
    const last = arrive(queue, 10, 2); // the last at 18
    queue.add(waiting(1, 16));
    queue.add(waiting(2, 18));
    // Two gaps of 2 ms would be 22; half the window after the last arrival is 23.
    expect(queue.next(policy, 18)).toEqual({ kind: "wait", until: last + 5 });
    // A request that came first and waited long enough leaves at its window anyway.
    const early = new WaitingQueue();
    arrive(early, 10, 2);
    early.add(waiting(1, 10));
    expect(early.next(policy, 18)).toEqual({ kind: "wait", until: 20 });
  });

  it("keeps the configured window until a few arrivals are known", () => {
    const queue = new WaitingQueue();
    arrive(queue, 3, 500);
    queue.add(waiting(1, 1000));
    expect(queue.next(policy, 1001)).toEqual({ kind: "wait", until: 1010 });
  });

  it("in the pool, sends sparse jobs to an idle runner without waiting out the window", async () => {
    let clock = 0;
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
        return batch.map((r) => ({ ok: true, output: r.params }));
      },
      batching: () => ({ maxBatch: 8, windowMs: 5 }),
    };
    const pool = createRunnerPool([runner], () => clock);
    for (let n = 1; n <= 12; n++) {
      clock = n * 120_000;
      const result = pool.run(request(n));
      // The first ones wait out their window (the pool's timer reads this clock). Once the
      // gaps are known to be longer than the window, they run with the clock standing
      // still, which a job waiting for its window never would.
      if (n <= 9) clock += 10;
      expect(await result).toEqual({ ok: true, output: { n } });
    }
  });
});
