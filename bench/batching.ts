/**
 * Batched against unbatched throughput for a model with a dynamic batch axis: a small
 * convolutional classifier (three stride-2 3×3 convolutions, 224×224 input) built here. Two
 * figures each way: bare onnxruntime (the same images as one batch of N or N runs of one),
 * and jobs through the agent with the model's `max_batch` at 1 and at N (dynamic batching
 * in the runner pool; the jobs are published at once, so batches fill).
 *
 *   npx tsx bench/batching.ts [--jobs 64] [--batch 8] [--threads 1] [--rounds 3]
 */
import { parseArgs } from "node:util";
import * as ort from "onnxruntime-node";
import sharp from "sharp";
import { sessionFactory } from "../gpu-agent/runner/providers.ts";
import { convNetModel, modelFolder } from "../test/helpers/onnx-models.ts";
import { type BenchJob, startBenchAgent } from "./ocr-agent-rig.ts";

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

const folder = modelFolder();
const file = folder.write("convnet.onnx", convNetModel({ size: SIZE, classes: 100 }));

try {
  // Bare: the same N input tensors, as N runs of one or N/batch runs of `batch`.
  const session = await sessionFactory("cpu", threads)(file);
  const one = 3 * SIZE * SIZE;
  const data = Float32Array.from({ length: one * batch }, (_, i) => Math.sin(i) * 0.5);
  const runAs = async (size: number) => {
    const started = performance.now();
    for (let done = 0; done < jobs; done += size) {
      const input = new ort.Tensor("float32", data.subarray(0, one * size), [size, 3, SIZE, SIZE]);
      await session.run({ input });
    }
    return jobs / ((performance.now() - started) / 1000);
  };
  await runAs(1);
  await runAs(batch);
  let bareOne = 0;
  let bareBatched = 0;
  for (let round = 0; round < rounds; round++) {
    bareOne += await runAs(1);
    bareBatched += await runAs(batch);
  }
  bareOne /= rounds;
  bareBatched /= rounds;
  await session.release();
  say(`bare: batch 1 ${bareOne.toFixed(1)} img/s, batch ${batch} ${bareBatched.toFixed(1)} img/s`);

  // Through the agent: distinct images, each decoded, resized and cropped in the runner.
  const images = await Promise.all(
    Array.from({ length: jobs }, (_, i) =>
      sharp({
        create: {
          width: 320 + (i % 5) * 16,
          height: 240 + (i % 3) * 16,
          channels: 3,
          background: { r: (i * 37) % 256, g: (i * 91) % 256, b: (i * 53) % 256 },
        },
      })
        .jpeg()
        .toBuffer(),
    ),
  );
  const toJobs = (): BenchJob[] =>
    images.map((bytes) => ({
      model: "convnet",
      input: {},
      files: { image: { bytes: new Uint8Array(bytes), contentType: "image/jpeg" } },
    }));
  // Both agents hold the same number of jobs at once (runners' batches plus look-ahead), so
  // the difference is the batching, not how far ahead each reads.
  const throughAgent = async (maxBatch: number) => {
    const agent = await startBenchAgent({
      models: ["convnet"],
      threads,
      lookahead: batch + 1 - maxBatch,
      modelConfigs: {
        convnet: { pipeline: "classification", file, max_batch: maxBatch, batch_window_ms: 10 },
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

  console.log("");
  console.log(
    `conv net ${SIZE}×${SIZE}, dynamic batch axis, cpu, ${threads} thread(s), ${jobs} images × ${rounds} rounds`,
  );
  console.log(
    `bare onnxruntime  : batch 1 ${bareOne.toFixed(1)} img/s | batch ${batch} ${bareBatched.toFixed(1)} img/s | × ${(bareBatched / bareOne).toFixed(2)}`,
  );
  console.log(
    `through the agent : max_batch 1 ${agentOne.rate.toFixed(1)} jobs/s | max_batch ${batch} ${agentBatched.rate.toFixed(1)} jobs/s ` +
      `(mean batch ${agentBatched.meanBatch.toFixed(1)}) | × ${(agentBatched.rate / agentOne.rate).toFixed(2)}`,
  );
} finally {
  folder.cleanup();
}
