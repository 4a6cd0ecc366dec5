import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import type { RunRequest, RunResult } from "../../gpu-agent/inference/types.ts";
import { createRunnerPool } from "../../gpu-agent/runner/pool.ts";
import { NO_ROOM, type Runner } from "../../gpu-agent/runner/types.ts";
import { deferred } from "../helpers/fake-runner.ts";

/**
 * Models placed by memory on one runner: what is loaded, unloaded and run first. The runner
 * here loads a model by noting it (each declared 100 MiB unless said otherwise) and holds
 * each run until the test lets it end.
 */
function loadingRunner(options: { loaded: string[]; sizes?: Record<string, number> }) {
  const sizeOf = (model: string) => options.sizes?.[model] ?? 100;
  const loaded = new Map(options.loaded.map((model) => [model, sizeOf(model)]));
  const events: string[] = [];
  const held: { model: string; end: (result: RunResult) => void }[] = [];
  const runner: Runner = {
    provider: "cpu",
    pid: 1,
    restarts: 0,
    async start() {},
    async stop() {},
    run(request: RunRequest) {
      events.push(`run ${request.model}`);
      const done = deferred<RunResult>();
      held.push({ model: request.model, end: done.resolve });
      return done.promise;
    },
    async loadModel(model) {
      events.push(`load ${model}`);
      loaded.set(model, sizeOf(model));
      return { memoryMb: sizeOf(model) };
    },
    async unloadModel(model) {
      events.push(`unload ${model}`);
      loaded.delete(model);
    },
    loadedModels: () => loaded,
  };
  /** Ends the oldest held run (of `model`, if given). */
  const finish = async (model?: string) => {
    const at = held.findIndex((run) => model === undefined || run.model === model);
    held.splice(at, 1)[0]!.end({ ok: true, output: null });
    await settle();
  };
  return { runner, events, loaded, finish };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 5));
const request = (model: string, n = 0): RunRequest => ({
  jobId: `${model}${n}`,
  model,
  files: {},
  params: {},
});

describe("models placed by memory", () => {
  it("unloads the least recently used idle model to load another", async () => {
    const { runner, events, loaded, finish } = loadingRunner({ loaded: ["a", "b"] });
    const pool = createRunnerPool([runner], undefined, {
      budgetMb: () => 200,
      declaredMb: () => 100,
    });
    for (const model of ["b", "a", "b"]) {
      const run = pool.run(request(model));
      await settle();
      await finish();
      await run;
    }
    const c = pool.run(request("c"));
    await settle();
    // a ran before the last b: it goes, before c loads, so the budget is never exceeded.
    expect(events.slice(3)).toEqual(["unload a", "load c", "run c"]);
    await finish("c");
    expect((await c).ok).toBe(true);
    expect([...loaded.keys()].sort()).toEqual(["b", "c"]);
    expect(pool.placement?.loadCount).toBe(1);
  });

  it("never unloads a model that runs, even when it is the least recently used", async () => {
    const { runner, events, finish } = loadingRunner({ loaded: ["b", "a"] });
    // The runner takes a second batch beside the one it runs, as a runner child does.
    Object.assign(runner, { depth: 2 });
    const pool = createRunnerPool([runner], undefined, {
      budgetMb: () => 200,
      declaredMb: () => 100,
    });
    const a = pool.run(request("a"));
    await settle();
    // a runs; c comes next beside it and must not unload a from under it.
    const c = pool.run(request("c"));
    await settle();
    // b has not run since it loaded and a has: still, a runs, so b goes.
    expect(events).toEqual(["run a", "unload b", "load c", "run c"]);
    await finish("a");
    await finish("c");
    expect((await a).ok && (await c).ok).toBe(true);
  });

  it("loads a model larger than the whole budget alone, and never unloads a pinned one", async () => {
    const { runner, events, loaded, finish } = loadingRunner({
      loaded: ["a", "b", "p"],
      sizes: { big: 500, p: 10 },
    });
    const pool = createRunnerPool([runner], undefined, {
      budgetMb: () => 210,
      pinned: ["p"],
      declaredMb: (model) => (model === "big" ? 500 : undefined),
    });
    const big = pool.run(request("big"));
    await settle();
    expect(events).toEqual(["unload a", "unload b", "load big", "run big"]);
    expect([...loaded.keys()].sort()).toEqual(["big", "p"]);
    await finish("big");
    expect((await big).ok).toBe(true);
  });

  it("says so when pinned models leave no room, and loads over the budget", async () => {
    // GANTRY_PRELOAD's models fill the budget: a job of another model loaded it past the
    // budget without a word, where on a GPU that is the memory the models were to stay in.
    const { runner, events, loaded, finish } = loadingRunner({ loaded: ["p", "q"] });
    const warnings: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split("\n").filter(Boolean)) {
          const {
            level: _level,
            time: _time,
            pid: _pid,
            hostname: _host,
            ...rest
          } = JSON.parse(line);
          warnings.push(rest);
        }
        done();
      },
    });
    const logger = pino({ level: "warn" }, sink);
    const pool = createRunnerPool([runner], undefined, {
      budgetMb: () => 200,
      pinned: ["p", "q"],
      declaredMb: () => 100,
      logger,
    });
    const c = pool.run(request("c"));
    await settle();
    expect(events).toEqual(["load c", "run c"]);
    expect([...loaded.keys()].sort()).toEqual(["c", "p", "q"]);
    expect(warnings).toEqual([
      { runner: 0, model: "c", used_mb: 300, budget_mb: 200, kept: ["p", "q"], msg: NO_ROOM },
    ]);
    await finish("c");
    expect((await c).ok).toBe(true);
  });

  it("loads a model again that a batch asks for while it is being unloaded", async () => {
    const { runner, events, finish } = loadingRunner({ loaded: ["a", "b"] });
    const unloading = deferred<void>();
    const unload = runner.unloadModel!.bind(runner);
    runner.unloadModel = async (model) => {
      await unloading.promise;
      await unload(model);
    };
    Object.assign(runner, { depth: 2 });
    const pool = createRunnerPool([runner], undefined, {
      budgetMb: () => 200,
      declaredMb: () => 100,
    });
    const c = pool.run(request("c"));
    await settle();
    // a is on its way out (least recently used): a job of a must not be sent to it now.
    const a = pool.run(request("a"));
    await settle();
    expect(events).toEqual([]);
    unloading.resolve();
    await settle();
    // a loads again (b goes: c runs) and runs beside c.
    expect(events).toEqual(["unload a", "load c", "run c", "unload b", "load a", "run a"]);
    await finish("c");
    await finish("a");
    expect((await c).ok && (await a).ok).toBe(true);
  });

  it("fails the batch with the load's error when its model cannot be loaded", async () => {
    const { runner } = loadingRunner({ loaded: [] });
    runner.loadModel = async () => {
      throw new Error("file is not an ONNX model");
    };
    const pool = createRunnerPool([runner]);
    const result = await pool.run(request("broken"));
    expect(result).toMatchObject({ ok: false, error: { code: "model_load_failed" } });
  });
});

describe("warm jobs first", () => {
  async function order(preferWarm: boolean): Promise<string[]> {
    const { runner, events, finish } = loadingRunner({ loaded: ["a", "b"] });
    const pool = createRunnerPool([runner], undefined, {
      budgetMb: () => 200,
      preferWarm,
      coldAfterMs: 60_000,
    });
    const runs = [pool.run(request("a", 0))];
    await settle();
    // Queued behind it, oldest first: c (cold), b (warm), c, b.
    for (const [model, n] of [
      ["c", 1],
      ["b", 2],
      ["c", 3],
      ["b", 4],
    ] as const) {
      runs.push(pool.run(request(model, n)));
      await settle();
    }
    for (let i = 0; i < 5; i++) await finish();
    await Promise.all(runs);
    return events.filter((event) => event.startsWith("run") || event.startsWith("load"));
  }

  it("runs the jobs of loaded models before older jobs that need a load", async () => {
    expect(await order(true)).toEqual(["run a", "run b", "run b", "load c", "run c", "run c"]);
  });

  it("keeps arrival order without the preference, loading more often", async () => {
    // c first (oldest): b, never run, goes for it; then b comes back in place of a.
    expect(await order(false)).toEqual([
      "run a",
      "load c",
      "run c",
      "load b",
      "run b",
      "run c",
      "run b",
    ]);
  });
});
