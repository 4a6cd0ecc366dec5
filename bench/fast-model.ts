/**
 * A fast model through the agent against a fair bare loop, in one run, with where each
 * job's time goes in the agent.
 *
 * The model is a dense classifier (224×224 input, 11M weights: about a millisecond a run
 * here, as a production classifier is on a GPU). The bare loop does the per-image work the
 * classification pipeline does, with the same functions: decode the JPEG, resize the
 * shorter side and centre-crop, normalise into the batch tensor, run, softmax and top-5;
 * in runs of one image and of `--batch` images (a batch's images decoded concurrently).
 * The agent runs the whole real path: a SQLite queue, the supervisor, claims, input
 * downloads and reports against the stub gateway over loopback HTTP, one child runner,
 * acks; with the model's `max_batch` at 1 and at `--batch`, and `--lookahead` deliveries
 * read ahead (default: two batches, what a fast model needs to hide claim and download).
 * Rounds alternate bare and agent so a busy machine slows both alike.
 *
 *   npx tsx bench/fast-model.ts [--jobs 64] [--batch 8] [--rounds 3] [--threads 1]
 *                               [--lookahead 16] [--window 10] [--no-inline] [--no-batch-routes]
 *                               [--prepare-threads 0] [--cpu-prof DIR]
 *
 * `--no-inline` sends every input by URL only (a download per job, as behind S3);
 * `--no-batch-routes` plays a gateway without the batched claim and event routes;
 * `--prepare-threads N` decodes and normalises on N worker threads in the runner child;
 * `--cpu-prof DIR` writes CPU profiles there: this process's (supervisor, queue and stub
 * gateway) over each side's last round, and each runner child's whole life.
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as ort from "onnxruntime-node";
import { softmax, topClasses } from "../gpu-agent/pipelines/classification/index.ts";
import { decodeImage } from "../gpu-agent/pipelines/vision/decode.ts";
import { IMAGENET, writeRgbPlanes } from "../gpu-agent/pipelines/vision/planes.ts";
import { resizeAndCenterCrop } from "../gpu-agent/pipelines/vision/resize.ts";
import { RUNNER_CPU_PROF_ENV } from "../gpu-agent/runner/child-process.ts";
import { sessionFactory } from "../gpu-agent/runner/providers.ts";
import { MAX_INLINE_INPUT_BYTES } from "../shared/protocol/agent.ts";
import { denseClassifierModel, modelFolder } from "../test/helpers/onnx-models.ts";
import { AgentProfile, formatSummary } from "./lib/agent-profile.ts";
import { distinctJpegs } from "./lib/images.ts";
import { type BenchAgent, type BenchJob, startBenchAgent } from "./lib/ocr-agent-rig.ts";
import { cpuDelta, formatThreads, processCpuMs, threadCpuMs } from "./lib/process-cpu.ts";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "64" },
    batch: { type: "string", default: "8" },
    rounds: { type: "string", default: "3" },
    threads: { type: "string", default: "1" },
    lookahead: { type: "string" },
    window: { type: "string", default: "10" },
    "no-inline": { type: "boolean", default: false },
    "prepare-threads": { type: "string", default: "0" },
    "no-batch-routes": { type: "boolean", default: false },
    "cpu-prof": { type: "string" },
  },
});
const jobs = Number(values.jobs);
const batch = Number(values.batch);
const rounds = Number(values.rounds);
const threads = Number(values.threads);
const lookahead = values.lookahead ? Number(values.lookahead) : 2 * batch;
const windowMs = Number(values.window);
const SIZE = 224;
const SHORTER = Math.round(SIZE / 0.875);
const say = (line: string) => console.log(`[fast-model] ${line}`);
const profileDir = values["cpu-prof"];
if (profileDir) process.env[RUNNER_CPU_PROF_ENV] = profileDir;
const inspector = profileDir ? new Session() : null;
inspector?.connect();

const folder = modelFolder();
const file = folder.write("dense.onnx", denseClassifierModel({ size: SIZE, classes: 1000 }));
const images = await distinctJpegs(jobs);

const session = await sessionFactory("cpu", threads)(file);
const inputName = session.inputNames[0]!;
const plane = 3 * SIZE * SIZE;

/** The pipeline's per-image work, by hand: images per second in runs of `size`. */
async function bare(size: number): Promise<number> {
  const started = performance.now();
  for (let from = 0; from < jobs; from += size) {
    const chunk = images.slice(from, from + size);
    const data = new Float32Array(plane * chunk.length);
    await Promise.all(
      chunk.map(async (bytes, i) => {
        const cropped = await resizeAndCenterCrop(await decodeImage(bytes), SHORTER, {
          width: SIZE,
          height: SIZE,
        });
        writeRgbPlanes(data, i * plane, cropped.data, SIZE, SIZE, IMAGENET);
      }),
    );
    const input = new ort.Tensor("float32", data, [chunk.length, 3, SIZE, SIZE]);
    const logits = (await session.run({ [inputName]: input }))[session.outputNames[0]!]!;
    const classes = logits.dims.at(-1)!;
    for (let i = 0; i < chunk.length; i++) {
      const row = (logits.data as Float32Array).subarray(i * classes, (i + 1) * classes);
      topClasses(softmax(row), 5);
    }
  }
  return jobs / ((performance.now() - started) / 1000);
}

const toJobs = (count = jobs): BenchJob[] =>
  images.slice(0, count).map((bytes) => ({
    model: "dense",
    input: {},
    files: { image: { bytes, contentType: "image/jpeg" } },
  }));

interface Side {
  maxBatch: number;
  agent: BenchAgent;
  profile: AgentProfile;
  seconds: number;
  bareSeconds: number;
  cpu: { supervisor: number; child: number; bare: number };
  /** CPU ms by thread kind over the agent runs: this process's and the runner child's. */
  threads: { own: Map<string, number>; child: Map<string, number> };
  /** Claims and reports per request to the gateway, in the last round. */
  batching: string;
}

/** Items per signed request, for claims and for reports, since call `from`. */
function callBatching(agent: BenchAgent, from: number): string {
  const calls = agent.gateway.calls.slice(from);
  const requests = agent.gateway.requests;
  const per = (kind: "claim" | "event", single: string, batched: string) => {
    const items = calls.filter((call) => call.kind === kind).length;
    const sent = (requests.get(single) ?? 0) + (requests.get(batched) ?? 0);
    return `${items} ${kind}s in ${sent} requests (${(items / Math.max(1, sent)).toFixed(1)} each)`;
  };
  return `${per("claim", "/internal/v1/jobs/{id}/claim", "/internal/v1/jobs/claims")}, ${per("event", "/internal/v1/jobs/{id}/events", "/internal/v1/jobs/events")}`;
}

async function side(maxBatch: number): Promise<Side> {
  const profile = new AgentProfile();
  const agent = await startBenchAgent({
    models: ["dense"],
    threads,
    lookahead,
    profile,
    stub: {
      batchRoutes: !values["no-batch-routes"],
      inlineInputBytes: values["no-inline"] ? -1 : MAX_INLINE_INPUT_BYTES,
    },
    modelConfigs: {
      dense: {
        pipeline: "classification",
        file,
        max_batch: maxBatch,
        batch_window_ms: windowMs,
        prepare_threads: Number(values["prepare-threads"]),
      },
    },
  });
  await agent.run(toJobs(maxBatch)); // the first batch of this size allocates its arenas
  return {
    maxBatch,
    agent,
    profile,
    seconds: 0,
    bareSeconds: 0,
    cpu: { supervisor: 0, child: 0, bare: 0 },
    threads: { own: new Map(), child: new Map() },
    batching: "",
  };
}

say(
  `starting two agents (max_batch 1 and ${batch}), lookahead ${lookahead}, window ${windowMs} ms…`,
);
const sides = [await side(1), await side(batch)];
try {
  for (const s of sides) await bare(s.maxBatch); // warm-up
  for (let round = 1; round <= rounds; round++) {
    for (const s of sides) {
      const bareBefore = process.cpuUsage();
      const bareRate = await bare(s.maxBatch);
      const bareUsed = process.cpuUsage(bareBefore);
      s.cpu.bare += (bareUsed.user + bareUsed.system) / 1000;
      s.bareSeconds += jobs / bareRate;
      s.profile.reset();
      s.agent.gateway.requests.clear();
      const callsBefore = s.agent.gateway.calls.length;
      const child = s.agent.runners[0]!.pid!;
      const childBefore = processCpuMs(child);
      const threadsBefore = { own: threadCpuMs(process.pid), child: threadCpuMs(child) };
      const profiled = inspector && round === rounds;
      if (profiled) await inspector.post("Profiler.enable");
      if (profiled) await inspector.post("Profiler.start");
      const before = process.cpuUsage();
      const { seconds } = await s.agent.run(toJobs());
      const used = process.cpuUsage(before);
      if (profiled) {
        const { profile } = await inspector.post("Profiler.stop");
        const name = join(profileDir!, `supervisor-batch${s.maxBatch}.cpuprofile`);
        writeFileSync(name, JSON.stringify(profile));
      }
      s.cpu.supervisor += (used.user + used.system) / 1000;
      s.cpu.child += processCpuMs(child) - childBefore;
      addInto(s.threads.own, cpuDelta(threadsBefore.own, threadCpuMs(process.pid)));
      addInto(s.threads.child, cpuDelta(threadsBefore.child, threadCpuMs(child)));
      s.seconds += seconds;
      s.batching = callBatching(s.agent, callsBefore);
      say(
        `round ${round}/${rounds} batch ${s.maxBatch}: bare ${bareRate.toFixed(0)} img/s, ` +
          `agent ${(jobs / seconds).toFixed(0)} jobs/s, ratio ${(jobs / seconds / bareRate).toFixed(3)}`,
      );
    }
  }
  console.log("");
  console.log(
    `cpu, ${threads} onnxruntime thread(s); ${jobs} images × ${rounds} rounds; lookahead ${lookahead}; ` +
      `prepare threads ${values["prepare-threads"]}`,
  );
  for (const s of sides) {
    const total = jobs * rounds;
    const bareRate = total / s.bareSeconds;
    const agentRate = total / s.seconds;
    const target = s.maxBatch === 1 ? 0.5 : 0.8;
    console.log(
      `batch ${String(s.maxBatch).padStart(2)}: fair bare ${bareRate.toFixed(1)} img/s | agent ` +
        `${agentRate.toFixed(1)} jobs/s | ratio ${(agentRate / bareRate).toFixed(3)} (target >= ${target})`,
    );
    console.log(
      `  cpu per image/job: bare ${(s.cpu.bare / total).toFixed(2)} ms | supervisor + stub gateway ` +
        `${(s.cpu.supervisor / total).toFixed(2)} ms | runner child ${(s.cpu.child / total).toFixed(2)} ms`,
    );
    console.log(`  cpu ms per job by thread, this process: ${formatThreads(s.threads.own, total)}`);
    console.log(
      `  cpu ms per job by thread, runner child: ${formatThreads(s.threads.child, total)}`,
    );
    console.log(`  gateway calls: ${s.batching}`);
    for (const line of formatSummary(s.profile.summary())) console.log(line);
  }
} finally {
  await Promise.allSettled(sides.map((s) => s.agent.close()));
  await session.release();
  folder.cleanup();
}

function addInto(sum: Map<string, number>, add: Map<string, number>): void {
  for (const [kind, ms] of add) sum.set(kind, (sum.get(kind) ?? 0) + ms);
}
