/**
 * Models placed by memory (issue 27 #6): a mixed stream over five models, of which two fit
 * in the runner's memory budget at once, on the CPU, with warm preference on (a free runner
 * takes jobs of a model it has loaded before older jobs of one it would have to load, for up
 * to `--cold-after` ms) and off (arrival order, so the models come in random order).
 *
 * One real runner child (tensor pipeline; each model a 4 MiB dense layer the bench builds,
 * declared 100 MiB in its config so the budget of 250 MiB holds two), loading and unloading
 * on demand; the real runner pool in front of it. Jobs arrive with exponential gaps (mean
 * `--gap-ms`), each for a model drawn uniformly, from a seeded generator, so both modes
 * see the same stream. Per mode: the share of jobs whose model was loaded when they
 * started (warm), model loads per 100 jobs, and the p50/p95 wait (from arrival until the
 * job started running: the wait for the runner plus the wait for the load).
 *
 *   npx tsx bench/placement.ts [--jobs 400] [--gap-ms 6] [--cold-after 2000] [--rounds 2]
 *                              [--width 1024]
 */
import { parseArgs } from "node:util";
import type { RunRequest } from "../gpu-agent/inference/types.ts";
import type { ModelConfig } from "../gpu-agent/pipelines/model-config.ts";
import { createChildRunner } from "../gpu-agent/runner/child-runner.ts";
import { createRunnerPool } from "../gpu-agent/runner/pool.ts";
import { buildModel, floats, modelFolder, node } from "../test/helpers/onnx-models.ts";
import { mulberry32 } from "../test/helpers/seeded-random.ts";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "400" },
    "gap-ms": { type: "string", default: "6" },
    "cold-after": { type: "string", default: "2000" },
    rounds: { type: "string", default: "2" },
    width: { type: "string", default: "1024" },
  },
});
const JOBS = Number(values.jobs);
const GAP_MS = Number(values["gap-ms"]);
const COLD_AFTER_MS = Number(values["cold-after"]);
const ROUNDS = Number(values.rounds);
const MODELS = ["m1", "m2", "m3", "m4", "m5"];
const WIDTH = Number(values.width);
const BUDGET_MB = 250;

/** y = x·W: a [batch, width] × [width, width] float layer (1024: 4 MiB of weights). */
function denseLayer(seed: number): Uint8Array {
  const random = mulberry32(seed);
  const weights = new Float32Array(WIDTH * WIDTH);
  for (let i = 0; i < weights.length; i++) weights[i] = random() - 0.5;
  return buildModel({
    inputs: [{ name: "x", dims: ["batch", WIDTH] }],
    outputs: [{ name: "y", dims: ["batch", WIDTH] }],
    nodes: [node("MatMul", ["x", "w"], ["y"])],
    initializers: [floats("w", [WIDTH, WIDTH], weights)],
  });
}

interface Arrival {
  at: number;
  model: string;
}

/** The stream both modes see: arrival times (ms from the start) and models. */
function stream(seed: number): Arrival[] {
  const random = mulberry32(seed);
  let at = 0;
  return Array.from({ length: JOBS }, () => {
    at += -Math.log(1 - random()) * GAP_MS;
    return { at, model: MODELS[Math.floor(random() * MODELS.length)]! };
  });
}

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;

async function runMode(
  configs: Record<string, ModelConfig>,
  arrivals: Arrival[],
  preferWarm: boolean,
) {
  const runner = createChildRunner({
    models: MODELS,
    preload: [],
    threads: 1,
    providers: ["cpu"],
    modelConfigs: configs,
    memoryBudgetMb: BUDGET_MB,
    logger: { info() {}, warn() {}, error() {} },
  });
  await runner.start();
  const pool = createRunnerPool([runner], undefined, {
    budgetMb: () => BUDGET_MB,
    declaredMb: () => 100,
    preferWarm,
    coldAfterMs: COLD_AFTER_MS,
  });
  const input = { dims: [1, WIDTH], type: "float32", data: Array(WIDTH).fill(0.5) };
  const waits: number[] = [];
  let warm = 0;
  let failed = 0;
  const started = performance.now();
  const runs = arrivals.map(async ({ at, model }, n) => {
    const delay = at - (performance.now() - started);
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    const request: RunRequest = {
      jobId: `j${n}`,
      model,
      files: {},
      params: { inputs: { x: input } },
    };
    const result = await pool.run(request, {
      onStart: ({ waitedMs, loadMs }) => {
        waits.push(waitedMs + loadMs);
        if (loadMs === 0) warm++;
      },
    });
    if (!result.ok) failed++;
  });
  await Promise.all(runs);
  const seconds = (performance.now() - started) / 1000;
  const loads = pool.placement?.loadCount ?? 0;
  await runner.stop();
  waits.sort((a, b) => a - b);
  return {
    warm: warm / arrivals.length,
    loadsPer100: (100 * loads) / arrivals.length,
    p50: quantile(waits, 0.5),
    p95: quantile(waits, 0.95),
    seconds,
    failed,
  };
}

const folder = modelFolder();
try {
  const configs: Record<string, ModelConfig> = {};
  MODELS.forEach((model, i) => {
    const file = folder.write(`${model}.onnx`, denseLayer(i + 1));
    configs[model] = { pipeline: "tensor", file, memory_mb: 100, max_batch: 1 };
  });
  console.log(
    `placement: ${JOBS} jobs over ${MODELS.length} models (${(WIDTH * WIDTH * 4) / 2 ** 20} MiB each, declared 100 MiB; budget ${BUDGET_MB} MiB: 2 fit), mean gap ${GAP_MS} ms, cold jobs wait at most ${COLD_AFTER_MS} ms, ${ROUNDS} round(s), CPU, 1 runner`,
  );
  console.log(
    "round  warm-first  warm share  loads/100 jobs  p50 wait ms  p95 wait ms  took s  failed",
  );
  for (let round = 1; round <= ROUNDS; round++) {
    const arrivals = stream(round);
    // Alternate which goes first, so a busy machine slows both alike.
    const order = round % 2 === 1 ? [true, false] : [false, true];
    for (const preferWarm of order) {
      const r = await runMode(configs, arrivals, preferWarm);
      console.log(
        [
          String(round).padEnd(5),
          (preferWarm ? "on" : "off").padEnd(10),
          `${(100 * r.warm).toFixed(1)}%`.padStart(10),
          r.loadsPer100.toFixed(1).padStart(14),
          r.p50.toFixed(0).padStart(11),
          r.p95.toFixed(0).padStart(12),
          r.seconds.toFixed(1).padStart(6),
          String(r.failed).padStart(6),
        ].join("  "),
      );
    }
  }
} finally {
  folder.cleanup();
}
