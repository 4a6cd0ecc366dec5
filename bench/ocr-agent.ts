/**
 * OCR text detection (PP-OCRv4 det) throughput through the agent (sql queue, supervisor,
 * child-process runner, presigned downloads, reports) next to bare onnxruntime on the same
 * model, image and thread count, in one run, with their ratio. One slot, so the agent can at
 * best match the bare loop; the target is a ratio of at least 0.95. Rounds alternate bare and
 * agent so that a busy machine slows both alike.
 *
 *   npx tsx bench/ocr-agent.ts [--jobs 30] [--rounds 4] [--threads 1] [--provider cpu] [--lookahead 1] [--full]
 *
 * `--full` measures whole OCR (detection + recognition) instead. On a GPU host, pass
 * `--provider cuda` to compare both on the GPU.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { ocrAssetPaths } from "../gpu-agent/pipelines/ocr/assets.ts";
import { OcrEngine } from "../gpu-agent/pipelines/ocr/index.ts";
import { sessionFactory } from "../gpu-agent/runner/providers.ts";
import { type BenchJob, startBenchAgent } from "./lib/ocr-agent-rig.ts";
import { defaultBenchImage } from "./ocr-bare.ts";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "30" },
    rounds: { type: "string", default: "4" },
    threads: { type: "string", default: "1" },
    provider: { type: "string", default: "cpu" },
    lookahead: { type: "string" },
    full: { type: "boolean", default: false },
  },
});
const jobs = Number(values.jobs);
const rounds = Number(values.rounds);
const threads = Number(values.threads);
const full = values.full;
const provider = values.provider === "cuda" ? "cuda" : "cpu";
const what = full ? "OCR (det + rec)" : "OCR detection";
const say = (line: string) => console.log(`[ocr-agent] ${line}`);

const image = new Uint8Array(await defaultBenchImage());

say(`loading PP-OCRv4 in-process for the bare loop (${provider}, ${threads} thread(s))…`);
const engine = await OcrEngine.load(sessionFactory(provider, threads));
const bareOnce = () => (full ? engine.recognize(image) : engine.detect(image));
await bareOnce();
/**
 * The ceiling: the detector's `session.run` alone on an input prepared once, with no decode,
 * resize or post-processing. Neither loop can beat it on one slot; how close the agent gets
 * says how much of the device it keeps busy. Detection only (recognition's crops vary).
 */
const inferenceOnce = full ? null : await detectorAlone();

say("starting the agent: sql queue, stub gateway, supervisor, 1 child runner…");
const agent = await startBenchAgent({
  models: ["ocr-det"],
  threads,
  providers: [provider],
  ...(values.lookahead ? { lookahead: Number(values.lookahead) } : {}),
  modelConfigs: { "ocr-det": { pipeline: "ocr", detection_only: !full } },
});
const job = (): BenchJob => ({
  model: "ocr-det",
  input: {},
  files: { image: { bytes: image, contentType: "image/png" } },
});

try {
  await agent.run([job()]); // the runner's first real job allocates its arenas
  let bareSeconds = 0;
  let inferenceSeconds = 0;
  let agentSeconds = 0;
  let busySeconds = 0;
  const cpu = { bare: 0, child: 0, supervisor: 0 };
  for (let round = 1; round <= rounds; round++) {
    const started = performance.now();
    let before = process.cpuUsage();
    for (let i = 0; i < jobs; i++) await bareOnce();
    const bare = (performance.now() - started) / 1000;
    cpu.bare += cpuMs(process.cpuUsage(before));
    if (inferenceOnce) {
      const inferenceStarted = performance.now();
      for (let i = 0; i < jobs; i++) await inferenceOnce();
      inferenceSeconds += (performance.now() - inferenceStarted) / 1000;
    }
    const child = agent.runners[0]!.pid!;
    const childBefore = childCpuMs(child);
    before = process.cpuUsage();
    const { seconds, runnerBusy } = await agent.run(Array.from({ length: jobs }, job));
    cpu.supervisor += cpuMs(process.cpuUsage(before));
    cpu.child += childCpuMs(child) - childBefore;
    bareSeconds += bare;
    agentSeconds += seconds;
    busySeconds += runnerBusy * seconds;
    say(
      `round ${round}/${rounds}: bare ${(jobs / bare).toFixed(2)} runs/s, ` +
        `agent ${(jobs / seconds).toFixed(2)} jobs/s, ratio ${(bare / seconds).toFixed(3)}, ` +
        `runner busy ${(runnerBusy * 100).toFixed(1)}%`,
    );
  }
  const bareRate = (jobs * rounds) / bareSeconds;
  const agentRate = (jobs * rounds) / agentSeconds;
  console.log("");
  console.log(
    `${what} through the agent : ${agentRate.toFixed(2)} jobs/s (${jobs * rounds} jobs, 1 slot, ${threads} thread(s), ${provider})`,
  );
  console.log(
    `${what}, bare onnxruntime : ${bareRate.toFixed(2)} runs/s (same model, image and threads)`,
  );
  if (inferenceOnce) {
    const inferenceRate = (jobs * rounds) / inferenceSeconds;
    console.log(
      `detector session.run alone : ${inferenceRate.toFixed(2)} runs/s (input prepared once; ` +
        `the agent reaches ${((agentRate / inferenceRate) * 100).toFixed(1)}% of it)`,
    );
  }
  console.log(
    `runner busy in the agent${" ".repeat(what.length - 10)} : ${((busySeconds / agentSeconds) * 100).toFixed(1)}% of its wall time (the rest: waiting for work)`,
  );
  const perJob = (ms: number) => (ms / (jobs * rounds)).toFixed(1);
  console.log(
    `cpu per job: bare ${perJob(cpu.bare)} ms | runner child ${perJob(cpu.child)} ms | ` +
      `supervisor with the stub gateway ${perJob(cpu.supervisor)} ms (Linux /proc; 0 elsewhere)`,
  );
  console.log(
    `ratio agent / bare${" ".repeat(what.length - 4)} : ${(agentRate / bareRate).toFixed(3)} (target >= 0.95)`,
  );
} finally {
  await agent.close();
  await engine.release();
}

async function detectorAlone(): Promise<() => Promise<unknown>> {
  const session = await sessionFactory(provider, threads)(ocrAssetPaths().detectionModel);
  const { tensor } = await engine.prepare(image);
  const feeds = { [session.inputNames[0]!]: tensor };
  await session.run(feeds);
  return () => session.run(feeds);
}

function cpuMs(usage: NodeJS.CpuUsage): number {
  return (usage.user + usage.system) / 1000;
}

/** A process's CPU time so far (user + system), from /proc; 0 where there is none. */
function childCpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    // utime and stime, in clock ticks (100 a second on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}
