import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WaitingQueue, type WaitingRequest } from "../../gpu-agent/batching/waiting-queue.ts";
import type { RunRequest, RunResult } from "../../gpu-agent/inference/types.ts";
import type { ClassificationOutput } from "../../gpu-agent/pipelines/classification/index.ts";
import { createChildRunner } from "../../gpu-agent/runner/child-runner.ts";
import { createRunnerPool } from "../../gpu-agent/runner/pool.ts";
import type { BatchPolicy, Runner } from "../../gpu-agent/runner/types.ts";
import { silentLogger } from "../helpers/agent-harness.ts";
import { deferred } from "../helpers/fake-runner.ts";
import { classifierModel, imageRequest, modelFolder } from "../helpers/onnx-models.ts";

const request = (model: string, n: number): RunRequest => ({
  jobId: `job_${model}_${n}`,
  model,
  files: {},
  params: { n },
});

const waiting = (model: string, n: number, enqueuedAt: number): WaitingRequest => ({
  request: request(model, n),
  enqueuedAt,
  solo: false,
  batchCap: Number.POSITIVE_INFINITY,
});

const ids = (next: ReturnType<WaitingQueue["next"]>) =>
  next.kind === "run" ? next.items.map((item) => item.request.params.n) : next;

describe("waiting queue", () => {
  const policy =
    (maxBatch: number, windowMs = 10) =>
    (): BatchPolicy => ({ maxBatch, windowMs });

  it("waits out the window for company, then runs what it has", () => {
    const queue = new WaitingQueue();
    queue.add(waiting("a", 1, 100));
    queue.add(waiting("a", 2, 104));
    expect(queue.next(policy(4), 105)).toEqual({ kind: "wait", until: 110 });
    expect(ids(queue.next(policy(4), 110))).toEqual([1, 2]);
    expect(queue.next(policy(4), 111)).toEqual({ kind: "idle" });
  });

  it("runs a full batch at once, and never more than the limit", () => {
    const queue = new WaitingQueue();
    for (let n = 1; n <= 5; n++) queue.add(waiting("a", n, 100));
    expect(ids(queue.next(policy(4), 100))).toEqual([1, 2, 3, 4]);
    expect(queue.next(policy(4), 100)).toEqual({ kind: "wait", until: 110 });
  });

  it("serves the model whose oldest job waited longest, one model per batch", () => {
    const queue = new WaitingQueue();
    queue.add(waiting("b", 1, 101));
    queue.add(waiting("a", 2, 100));
    queue.add(waiting("b", 3, 102));
    expect(ids(queue.next(policy(1), 100))).toEqual([2]);
    expect(ids(queue.next(policy(8, 0), 102))).toEqual([1, 3]);
  });

  it("keeps a retried job's place and honours its smaller batch cap and solo flag", () => {
    const queue = new WaitingQueue();
    queue.add(waiting("a", 3, 100));
    queue.add({ ...waiting("a", 1, 50), batchCap: 2 });
    queue.add({ ...waiting("a", 2, 60), batchCap: 2 });
    expect(ids(queue.next(policy(8), 100))).toEqual([1, 2]);
    queue.add({ ...waiting("a", 4, 90), solo: true });
    expect(ids(queue.next(policy(8), 200))).toEqual([4]);
    expect(ids(queue.next(policy(8), 200))).toEqual([3]);
  });
});

/** A batching runner in this process: records each batch, answers by a behaviour. */
function batchingRunner(
  maxBatch: number,
  behaviour: (batch: readonly RunRequest[]) => Promise<RunResult[]> | RunResult[] = (batch) =>
    batch.map((r) => ({ ok: true, output: r.params })),
  windowMs = 60_000,
) {
  const batches: number[][] = [];
  let limit = maxBatch;
  const runner: Runner & { batches: number[][]; shrink(to: number): void } = {
    batches,
    shrink(to) {
      limit = to;
    },
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
      return behaviour(batch);
    },
    batching: () => ({ maxBatch: limit, windowMs }),
  };
  return runner;
}

describe("runner pool batching", () => {
  it("runs jobs of one model that wait together as one batch, bounded by max_batch", async () => {
    const gate = deferred<void>();
    const runner = batchingRunner(3, async (batch) => {
      await gate.promise;
      return batch.map((r) => ({ ok: true, output: r.params }));
    });
    let clock = 0;
    const pool = createRunnerPool([runner], () => clock);
    const starts: number[] = [];
    const results = [1, 2, 3, 4, 5].map((n) =>
      pool.run(request("a", n), { onStart: ({ batch }) => starts.push(batch) }),
    );
    // Three filled the first batch and left at once; the other two wait for the runner.
    expect(runner.batches).toEqual([[1, 2, 3]]);
    expect(pool.waitingCount()).toBe(2);
    // The first batch ran longer than the window: the two waiting leave as soon as it ends.
    clock = 60_000;
    gate.resolve();
    expect(await Promise.all(results)).toEqual(
      [1, 2, 3, 4, 5].map((n) => ({ ok: true, output: { n } })),
    );
    expect(runner.batches).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
    expect(starts).toEqual([3, 3, 3, 2, 2]);
    expect(pool.capacity(["a"])).toBe(3);
  });

  it("retries jobs of a batch that ran out of memory in smaller batches", async () => {
    const runner = batchingRunner(4, (batch) => {
      if (batch.length > 1) {
        runner.shrink(Math.floor(batch.length / 2));
        return batch.map(() => ({
          ok: false,
          error: { type: "transient", code: "out_of_memory", message: "CUDA out of memory" },
        }));
      }
      return batch.map((r) => ({ ok: true, output: r.params }));
    });
    const pool = createRunnerPool([runner]);
    const results = await Promise.all([1, 2, 3, 4].map((n) => pool.run(request("a", n))));
    expect(results.every((result) => result.ok)).toBe(true);
    // The runner's own limit fell to one, so the last two no longer pair up either.
    expect(runner.batches).toEqual([[1, 2, 3, 4], [1, 2], [1], [2], [3], [4]]);
  });

  it("reruns a batch that crashed the runner one job at a time, so only the culprit fails", async () => {
    const crashed: RunResult = {
      ok: false,
      error: { type: "transient", code: "runner_crashed", message: "exit code 70" },
    };
    const runner = batchingRunner(3, (batch) =>
      batch.some((r) => r.params.n === 2)
        ? batch.map(() => crashed)
        : batch.map((r) => ({ ok: true, output: r.params })),
    );
    const pool = createRunnerPool([runner]);
    const results = await Promise.all([1, 2, 3].map((n) => pool.run(request("a", n))));
    expect(results.map((result) => result.ok)).toEqual([true, false, true]);
    expect(results[1]).toEqual(crashed);
    expect(runner.batches).toEqual([[1, 2, 3], [1], [2], [3]]);
  });

  it("withdraws a job whose attempt is aborted while it waits", async () => {
    const gate = deferred<void>();
    const runner = batchingRunner(1, async (batch) => {
      await gate.promise;
      return batch.map((r) => ({ ok: true, output: r.params }));
    });
    const pool = createRunnerPool([runner]);
    const first = pool.run(request("a", 1));
    const abort = new AbortController();
    const second = pool.run(request("a", 2), { signal: abort.signal });
    abort.abort();
    expect(await second).toMatchObject({ ok: false, error: { code: "withdrawn" } });
    gate.resolve();
    expect(await first).toEqual({ ok: true, output: { n: 1 } });
    expect(runner.batches).toEqual([[1]]);
  });
});

describe("runner pool with runners that take the next batch while one runs", () => {
  /**
   * A runner of depth 2 whose runs wait for the test; it records what ran beside what. Job
   * `crashOn` "crashes" it when released: every run in it then fails as a real child's would.
   */
  function pipelinedRunner(crashOn?: number) {
    const gates = new Map<number, ReturnType<typeof deferred<void>>>();
    const running = new Set<number>();
    let blamed: number | null = null;
    let lost = new Set<number>();
    const log: string[] = [];
    const waiters: { entry: string; resolve: () => void }[] = [];
    const push = (entry: string) => {
      log.push(entry);
      for (const waiter of waiters.filter((w) => w.entry === entry)) waiter.resolve();
    };
    const runner: Runner & {
      log: string[];
      release(n: number): void;
      /** Resolves once `entry` is in the log (the second time for `nth: 2`). */
      reached(entry: string, nth?: number): Promise<void>;
    } = {
      log,
      release: (n) => gates.get(n)?.resolve(),
      reached(entry, nth = 1) {
        if (log.filter((e) => e === entry).length >= nth) return Promise.resolve();
        return new Promise((resolve) => {
          const waiter = {
            entry,
            resolve: () => {
              if (log.filter((e) => e === entry).length >= nth) resolve();
            },
          };
          waiters.push(waiter);
        });
      },
      depth: 2,
      provider: "cpu",
      pid: 7,
      restarts: 0,
      async start() {},
      async stop() {},
      async run(one) {
        const n = one.params.n as number;
        const gate = deferred<void>();
        gates.set(n, gate);
        running.add(n);
        push(`start ${n}`);
        await gate.promise;
        // As the child runner reports a crash: the oldest run in it (the one on the device)
        // is blamed, the runs behind it are lost.
        if (crashOn === n) {
          const [onDevice, ...behind] = running;
          blamed = onDevice ?? null;
          lost = new Set(behind);
        }
        running.delete(n);
        push(`end ${n}`);
        if (blamed === n) {
          blamed = null;
          return { ok: false, error: { type: "transient", code: "runner_crashed", message: "x" } };
        }
        if (lost.delete(n)) {
          return { ok: false, error: { type: "transient", code: "runner_lost", message: "x" } };
        }
        return { ok: true, output: one.params };
      },
    };
    return runner;
  }

  it("hands a runner its next job while the current one runs", async () => {
    const runner = pipelinedRunner();
    const pool = createRunnerPool([runner]);
    const results = [1, 2, 3].map((n) => pool.run(request("a", n)));
    expect(runner.log).toEqual(["start 1", "start 2"]);
    expect(pool.waitingCount()).toBe(1);
    runner.release(1);
    await runner.reached("start 3");
    expect(runner.log).toEqual(["start 1", "start 2", "end 1", "start 3"]);
    runner.release(2);
    runner.release(3);
    expect((await Promise.all(results)).every((r) => r.ok)).toBe(true);
    expect(pool.idleCapacity(["a"])).toBe(1);
  });

  it("blames a crash on the job on the device; the one behind it reruns alone", async () => {
    const runner = pipelinedRunner(1);
    const pool = createRunnerPool([runner]);
    const results = [1, 2, 3].map((n) => pool.run(request("a", n)));
    expect(runner.log).toEqual(["start 1", "start 2"]);
    runner.release(1); // job 1 crashes the runner; job 2 was waiting behind it
    expect(await results[0]).toMatchObject({ ok: false, error: { code: "runner_crashed" } });
    await runner.reached("start 3");
    runner.release(2);
    await runner.reached("end 2");
    // Job 2 waits to run alone: nothing may share the runner with it, so job 3 ends first.
    runner.release(3);
    await runner.reached("start 2", 2);
    runner.release(2);
    expect(await results[1]).toEqual({ ok: true, output: { n: 2 } });
    expect(await results[2]).toEqual({ ok: true, output: { n: 3 } });
    expect(runner.log).toEqual([
      "start 1",
      "start 2",
      "end 1",
      "start 3",
      "end 2",
      "end 3",
      "start 2",
      "end 2",
    ]);
  });
});

describe("dynamic batching in the child runner (classification model, batch axis dynamic)", () => {
  const models = modelFolder();
  let runner: Runner;
  const colours = ["#ff0000", "#00ff00", "#0000ff", "#ffaa00", "#8040c0", "#ffffff"];
  let images: Buffer[];

  beforeAll(async () => {
    const file = models.write(
      "colours.onnx",
      classifierModel({
        size: 32,
        weights: [
          [1, 0, 0, 0.5],
          [0, 1, 0, 0.5],
          [0, 0, 1, 0.5],
        ],
      }),
    );
    runner = createChildRunner({
      models: ["colours"],
      threads: 1,
      providers: ["cpu"],
      logger: silentLogger,
      modelConfigs: {
        colours: { pipeline: "classification", file, max_batch: 4, top_k: 4 },
      },
    });
    await runner.start();
    images = await Promise.all(
      colours.map((background, i) =>
        sharp({ create: { width: 40 + i * 7, height: 30 + i * 5, channels: 3, background } })
          .png()
          .toBuffer(),
      ),
    );
  });

  afterAll(async () => {
    await runner?.stop();
    models.cleanup();
  });

  it("matches unbatched runs within float tolerance; a corrupt image fails alone", async () => {
    expect(runner.batching!("colours")).toEqual({ maxBatch: 4, windowMs: 10 });
    const requests = images.map((png, i) => ({
      ...imageRequest("colours", png),
      jobId: `job_${i}`,
    }));
    requests.splice(2, 0, {
      ...imageRequest("colours", new Uint8Array([0x89, 0x50])),
      jobId: "job_bad",
    });

    const alone: RunResult[] = [];
    for (const r of requests) alone.push(await runner.run(r));

    const pool = createRunnerPool([runner]);
    const batchSizes: number[] = [];
    const batched = await Promise.all(
      requests.map((r) => pool.run(r, { onStart: ({ batch }) => batchSizes.push(batch) })),
    );

    // Seven jobs submitted together: a full batch of four, then the other three.
    expect(batchSizes).toEqual([4, 4, 4, 4, 3, 3, 3]);
    expect(batched[2]).toMatchObject({
      ok: false,
      error: { type: "permanent", code: "invalid_image" },
    });
    // The same failure either way; only the device time it took differs.
    expect({ ...alone[2], usage: undefined }).toEqual({ ...batched[2], usage: undefined });
    batched.forEach((result, i) => {
      if (i === 2) return;
      const single = alone[i]!;
      if (!result.ok || !single.ok) throw new Error(`job ${i} failed`);
      const b = (result.output as ClassificationOutput).predictions;
      const s = (single.output as ClassificationOutput).predictions;
      expect(b.map((p) => p.class_id)).toEqual(s.map((p) => p.class_id));
      b.forEach((p, k) => {
        expect(p.score).toBeCloseTo(s[k]!.score, 5);
      });
    });
  });
});
