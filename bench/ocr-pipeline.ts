/**
 * OCR jobs/s through the whole embedded pipeline (upload, 202, sql queue, supervisor,
 * child runner, blob upload, report) next to bare onnxruntime on the same model and thread
 * count, and their ratio. One slot, so the pipeline can at best match the bare loop.
 *
 *   npx tsx bench/ocr-pipeline.ts [--jobs 40] [--threads 2] [--seconds 15]
 */
import { parseArgs } from "node:util";
import { followJob } from "../test/helpers/sse.ts";
import { startTestAgent } from "../test/helpers/test-agent.ts";
import { startTestGateway, uploadFile } from "../test/helpers/test-gateway.ts";
import { benchBareOcr, defaultBenchImage } from "./ocr-bare.ts";

const { values } = parseArgs({
  options: {
    jobs: { type: "string", default: "40" },
    threads: { type: "string", default: "2" },
    seconds: { type: "string", default: "15" },
  },
});
const jobs = Number(values.jobs);
const threads = Number(values.threads);
const say = (line: string) => console.log(`[ocr-pipeline] ${line}`);

const image = await defaultBenchImage();

say(`bare onnxruntime: ${values.seconds} s loop, ${threads} thread(s)…`);
const bare = await benchBareOcr({
  seconds: Number(values.seconds),
  threads,
  image,
  onProgress: say,
});
say(
  `bare: ${bare.runsPerSecond.toFixed(2)} runs/s (p50 ${bare.p50Ms.toFixed(0)} ms) on ${bare.provider}`,
);

say("starting gateway and agent (1 slot)…");
const gw = await startTestGateway({ models: ["ocr"] });
const agent = await startTestAgent(gw, { models: ["ocr"], slots: 1, threads });
try {
  // Warm-up job: the runner's first inference allocates its arenas.
  const warm = await uploadFile(gw, image, "image/png");
  await runJobs(gw, [warm]);
  const uploads: string[] = [];
  for (let i = 0; i < jobs; i++) uploads.push(await uploadFile(gw, image, "image/png"));
  say(`submitting ${jobs} OCR jobs…`);
  const started = performance.now();
  await runJobs(gw, uploads, (done) => {
    if (done % 10 === 0) say(`${done}/${jobs} succeeded`);
  });
  const seconds = (performance.now() - started) / 1000;
  const jobsPerSecond = jobs / seconds;
  console.log("");
  console.log(
    `OCR through the pipeline : ${jobsPerSecond.toFixed(2)} jobs/s (${jobs} jobs in ${seconds.toFixed(1)} s, 1 slot, ${threads} thread(s))`,
  );
  console.log(
    `bare onnxruntime         : ${bare.runsPerSecond.toFixed(2)} runs/s (${bare.runs} runs, same model and threads)`,
  );
  console.log(`ratio pipeline / bare    : ${(jobsPerSecond / bare.runsPerSecond).toFixed(3)}`);
} finally {
  await agent.stop();
  await gw.close();
}

async function runJobs(
  gateway: Awaited<ReturnType<typeof startTestGateway>>,
  uploads: string[],
  onDone?: (n: number) => void,
) {
  let done = 0;
  const ids = await Promise.all(
    uploads.map(async (upload) => {
      const response = await gateway.api("/v1/jobs", {
        method: "POST",
        json: { model: "ocr", input: { image: upload } },
      });
      return ((await response.json()) as { id: string }).id;
    }),
  );
  await Promise.all(
    ids.map(async (id) => {
      const { statuses } = await followJob((p) => gateway.api(p), id);
      if (statuses.at(-1) !== "succeeded") throw new Error(`job ${id} ended ${statuses.at(-1)}`);
      onDone?.(++done);
    }),
  );
}
