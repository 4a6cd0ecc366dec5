/**
 * Batched against unbatched throughput for models with a dynamic batch axis:
 * - a classifier with its weight in dense layers (built here, 224×224 input, 11M weights),
 *   bare onnxruntime (runs of one image against runs of a batch) and as jobs through the
 *   agent with the model's `max_batch` at 1 and at the batch size (dynamic batching in the
 *   runner pool; the jobs are published at once, so batches fill);
 * - PP-OCRv4's recognition model (48×320 crops), bare, as PaddleOCR batches its crops.
 *
 *   npx tsx bench/batching.ts [--jobs 64] [--batch 8] [--threads 1] [--rounds 3]
 */
import { parseArgs } from "node:util";
import * as ort from "onnxruntime-node";
import { ocrAssetPaths } from "../gpu-agent/pipelines/ocr/assets.ts";
import { sessionFactory } from "../gpu-agent/runner/providers.ts";
import { denseClassifierModel, modelFolder } from "../test/helpers/onnx-models.ts";
import { distinctJpegs } from "./lib/images.ts";
import { type BenchJob, startBenchAgent } from "./lib/ocr-agent-rig.ts";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "64" },
    batch: { type: "string", default: "8" },
    threads: { type: "string", default: "1" },
    rounds: { type: "string", default: "3" },
  },
});
const jobs = Number(values.jobs);
const batch = Number(values.batch);
const threads = Number(values.threads);
const rounds = Number(values.rounds);
const say = (line: string) => console.log(`[batching] ${line}`);
const SIZE = 224;

/** Inputs per second through a bare session, as runs of one and as runs of `batch`. */
async function bare(modelFile: string, shape: readonly number[]) {
  const session = await sessionFactory("cpu", threads)(modelFile);
  const one = shape.reduce((a, b) => a * b, 1);
  const data = Float32Array.from({ length: one * batch }, (_, i) => Math.sin(i) * 0.5);
  const runAs = async (size: number) => {
    const started = performance.now();
    for (let done = 0; done < jobs; done += size) {
      const input = new ort.Tensor("float32", data.subarray(0, one * size), [size, ...shape]);
      await session.run({ [session.inputNames[0]!]: input });
    }
    return jobs / ((performance.now() - started) / 1000);
  };
  await runAs(1);
  await runAs(batch);
  let single = 0;
  let batched = 0;
  // Alternating, so a busy machine slows both alike.
  for (let round = 0; round < rounds; round++) {
    single += await runAs(1);
    batched += await runAs(batch);
  }
  await session.release();
  return { single: single / rounds, batched: batched / rounds };
}

const folder = modelFolder();
const file = folder.write("dense.onnx", denseClassifierModel({ size: SIZE, classes: 1000 }));

try {
  const dense = await bare(file, [3, SIZE, SIZE]);
  say(
    `bare dense: batch 1 ${dense.single.toFixed(1)}, batch ${batch} ${dense.batched.toFixed(1)} img/s`,
  );
  const recognizer = await bare(ocrAssetPaths().recognitionModel, [3, 48, 320]);
  say(
    `bare PP-OCRv4 rec: batch 1 ${recognizer.single.toFixed(1)}, batch ${batch} ${recognizer.batched.toFixed(1)} crops/s`,
  );

  // Through the agent: distinct images, each decoded, resized and cropped in the runner.
  const images = await distinctJpegs(jobs);
  const toJobs = (): BenchJob[] =>
    images.map((bytes) => ({
      model: "dense",
      input: {},
      files: { image: { bytes: new Uint8Array(bytes), contentType: "image/jpeg" } },
    }));
  // Both agents hold the same number of jobs at once (runners' batches plus look-ahead), so
  // the difference is the batching, not how far ahead each reads.
  const throughAgent = async (maxBatch: number) => {
    const agent = await startBenchAgent({
      models: ["dense"],
      threads,
      lookahead: batch + 1 - maxBatch,
      modelConfigs: {
        dense: { pipeline: "classification", file, max_batch: maxBatch, batch_window_ms: 10 },
      },
    });
    try {
      await agent.run(toJobs().slice(0, maxBatch)); // warm-up: first batch of this size
      let seconds = 0;
      const sizes: number[] = [];
      for (let round = 0; round < rounds; round++) {
        const result = await agent.run(toJobs());
        seconds += result.seconds;
        sizes.push(...result.batches);
      }
      const meanBatch = sizes.reduce((a, b) => a + b, 0) / Math.max(1, sizes.length);
      return { rate: (jobs * rounds) / seconds, meanBatch };
    } finally {
      await agent.close();
    }
  };
  say("through the agent, max_batch 1…");
  const agentOne = await throughAgent(1);
  say(`through the agent, max_batch ${batch}…`);
  const agentBatched = await throughAgent(batch);

  const times = (a: number, b: number) => `× ${(b / a).toFixed(2)}`;
  console.log("");
  console.log(`cpu, ${threads} thread(s); ${jobs} inputs × ${rounds} rounds each way`);
  console.log(
    `dense classifier ${SIZE}×${SIZE}, bare     : batch 1 ${dense.single.toFixed(1)} img/s | ` +
      `batch ${batch} ${dense.batched.toFixed(1)} img/s | ${times(dense.single, dense.batched)}`,
  );
  console.log(
    `dense classifier, through the agent : max_batch 1 ${agentOne.rate.toFixed(1)} jobs/s | ` +
      `max_batch ${batch} ${agentBatched.rate.toFixed(1)} jobs/s (mean batch ` +
      `${agentBatched.meanBatch.toFixed(1)}) | ${times(agentOne.rate, agentBatched.rate)}`,
  );
  console.log(
    `PP-OCRv4 recognition 48×320, bare   : batch 1 ${recognizer.single.toFixed(1)} crops/s | ` +
      `batch ${batch} ${recognizer.batched.toFixed(1)} crops/s | ${times(recognizer.single, recognizer.batched)}`,
  );
} finally {
  folder.cleanup();
}
