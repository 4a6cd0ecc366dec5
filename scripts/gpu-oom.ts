/**
 * A batch that runs out of GPU memory, for real (scripts/gpu-check.sh, issue 27 #3, #5): a
 * model whose every job needs 2 GiB on the device (a [1, 1024] input tiled 524 288 times,
 * then summed: the output is small, the intermediate is not), `max_batch` 128, so the first
 * batch asks for 256 GiB. The runner must come back with `out_of_memory`, replace its child,
 * halve the batch until it fits, and every job must succeed. Prints each batch the child
 * ran, the runner's batch limit at the end and its restarts. CUDA only: on a CPU this would
 * ask the host for 256 GiB, so it refuses to start without the cuda provider.
 *
 *   npx tsx scripts/gpu-oom.ts [--jobs 128] [--device 0]
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { pino } from "pino";
import { createChildRunner } from "../gpu-agent/runner/child-runner.ts";
import { createRunnerPool } from "../gpu-agent/runner/pool.ts";
import { probeProvider } from "../gpu-agent/runner/providers.ts";
import { buildModel, int64s, node } from "../test/helpers/onnx-models.ts";

const { values } = parseArgs({
  options: { jobs: { type: "string", default: "128" }, device: { type: "string", default: "0" } },
});
const JOBS = Number(values.jobs);
const DEVICE = Number(values.device);
const say = (line: string) => console.log(`[gpu-oom] ${line}`);

try {
  await probeProvider("cuda", DEVICE);
} catch (error) {
  say(
    `FAIL: the cuda provider does not run here: ${error instanceof Error ? error.message : error}`,
  );
  process.exit(1);
}

const REPEATS = 524_288; // [1, 1024] floats tiled: 2 GiB per job
const model = buildModel({
  inputs: [{ name: "x", dims: ["batch", 1024] }],
  outputs: [{ name: "y", dims: ["batch", 1] }],
  nodes: [
    node("Tile", ["x", "repeats"], ["big"]),
    node("ReduceSum", ["big", "axes"], ["y"], { keepdims: 1 }),
  ],
  initializers: [int64s("repeats", [2], [1, REPEATS]), int64s("axes", [1], [1])],
});
const dir = mkdtempSync(join(tmpdir(), "gantry-gpu-oom-"));
const file = join(dir, "tile.onnx");
writeFileSync(file, model);

const batches: number[] = [];
const runner = createChildRunner({
  models: ["tile"],
  threads: 1,
  providers: ["cuda"],
  modelConfigs: { tile: { pipeline: "tensor", file, max_batch: 128, batch_window_ms: 200 } },
  gpu: { index: DEVICE, cudaDeviceId: DEVICE },
  onBatch: (stats) => batches.push(stats.size),
  // Its warnings (out of memory, child replaced) are part of what this shows.
  logger: pino({ name: "gpu-oom", level: "warn" }),
});
try {
  say(`starting a runner on CUDA device ${DEVICE}…`);
  await runner.start();
  const pool = createRunnerPool([runner]);
  const input = { dims: [1, 1024], type: "float32", data: Array(1024).fill(1) };
  say(`${JOBS} jobs at once, 2 GiB each on the device, max_batch 128…`);
  const started = performance.now();
  const results = await Promise.all(
    Array.from({ length: JOBS }, (_, n) =>
      pool.run({ jobId: `j${n}`, model: "tile", files: {}, params: { inputs: { x: input } } }),
    ),
  );
  const failed = results.filter((result) => !result.ok);
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  say(`batches the child ran, in order: ${batches.join(", ")}`);
  say(
    `runner batch limit now: ${runner.batching?.("tile").maxBatch}; child restarts: ${runner.restarts}`,
  );
  say(`${JOBS - failed.length}/${JOBS} jobs succeeded in ${seconds} s`);
  for (const result of failed.slice(0, 3))
    if (!result.ok) say(`failed: ${JSON.stringify(result.error)}`);
  const ok = failed.length === 0 && runner.restarts >= 1;
  say(ok ? "PASS: out of memory, fresh child, smaller batches, every job done" : "FAIL");
  process.exitCode = ok ? 0 : 1;
} finally {
  await runner.stop();
  rmSync(dir, { recursive: true, force: true });
}
