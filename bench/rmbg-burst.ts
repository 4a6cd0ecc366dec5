/**
 * The founding story's batch: a burst of product photos through the embedded default
 * (`gantry start` as it ships: SQLite jobs and queue, one agent, one slot, `rmbg` on ISNet
 * medium), submitted all at once over HTTP; then the wall time from the first submit to the
 * last result, jobs/s, and the p50/p95 of each job's wait (created → started, the job's
 * `metrics.queue_ms`) and of its run. Beside it, the same machine's bare `session.run` rate,
 * so the jobs/s reads as a share of what the model alone allows.
 *
 *   npx tsx bench/rmbg-burst.ts [--burst 500] [--threads 2] [--concurrency 16]
 *
 * On two shared cores 500 jobs take about 15 minutes; pass a smaller --burst to sample.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import * as ort from "onnxruntime-node";
import { resolveModels, toModelConfigs } from "../gpu-agent/registry/index.ts";
import { sessionFactory } from "../gpu-agent/runner/providers.ts";
import { productPhoto } from "../test/helpers/product-photo.ts";

const { values } = parseArgs({
  options: {
    burst: { type: "string", default: "500" },
    threads: { type: "string", default: "2" },
    concurrency: { type: "string", default: "16" },
  },
});
const burst = Number(values.burst);
const concurrency = Number(values.concurrency);
const say = (line: string) => console.log(`[rmbg-burst] ${line}`);

const dir = mkdtempSync(join(tmpdir(), "gantry-burst-"));
const ceiling = await sessionRunRate(3);
say(
  `bare session.run on the embedded rmbg (ISNet medium): ${ceiling.toFixed(3)} runs/s (${values.threads} thread(s))`,
);
const port = await freePort();
const url = `http://127.0.0.1:${port}`;
const child = spawn(process.execPath, ["bin/gantry.js", "start"], {
  env: {
    ...process.env,
    PORT: String(port),
    GANTRY_DATA_DIR: dir,
    GANTRY_MODEL_CACHE_DIR: join(dir, "model-cache"),
    GANTRY_THREADS: values.threads,
    GANTRY_LOG_LEVEL: "warn",
  },
  stdio: ["ignore", "pipe", "pipe"],
});
try {
  await started(child);
  const key = (JSON.parse(readFileSync(join(dir, "secrets.json"), "utf8")) as { apiKey: string })
    .apiKey;
  const api = async (path: string, init: RequestInit = {}): Promise<Response> => {
    for (;;) {
      const response = await fetch(`${url}${path}`, {
        ...init,
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          ...init.headers,
        },
      });
      if (response.status !== 429) return response;
      await pause(Number(response.headers.get("retry-after") ?? "1") * 1000);
    }
  };
  const photo = (await productPhoto()).png;
  const upload = (await (
    await api("/v1/uploads", {
      method: "POST",
      body: JSON.stringify({ content_type: "image/png", size_bytes: photo.length }),
    })
  ).json()) as { id: string; url: string; headers: Record<string, string> };
  await fetch(upload.url, { method: "PUT", headers: upload.headers, body: new Uint8Array(photo) });

  say(
    `submitting ${burst} jobs (rmbg, one 640×480 photo each, ${concurrency} requests at a time)…`,
  );
  const begin = performance.now();
  const ids: string[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < burst) {
        next++;
        const response = await api("/v1/jobs", {
          method: "POST",
          body: JSON.stringify({ model: "rmbg", input: { image: upload.id } }),
        });
        if (response.status !== 202)
          throw new Error(`submit answered ${response.status}: ${await response.text()}`);
        ids.push(((await response.json()) as { id: string }).id);
      }
    }),
  );
  const submitted = (performance.now() - begin) / 1000;
  say(`submitted in ${submitted.toFixed(1)} s; waiting for the results…`);
  const jobs: Job[] = [];
  for (const id of ids) {
    jobs.push(await finished(api, id));
    // A 500-image burst takes minutes: say how far it is.
    if (jobs.length % 25 === 0 || jobs.length === ids.length) {
      const elapsed = (performance.now() - begin) / 1000;
      say(`${jobs.length}/${ids.length} finished after ${elapsed.toFixed(0)} s`);
    }
  }
  const wall = (performance.now() - begin) / 1000;
  const failed = jobs.filter((job) => job.status !== "succeeded");
  const waits = jobs.map((job) => job.metrics.queue_ms / 1000);
  const runs = jobs.flatMap((job) =>
    job.metrics.run_ms === null ? [] : [job.metrics.run_ms / 1000],
  );
  console.log("");
  console.log(
    `burst of ${burst} through the embedded default (1 slot, ${values.threads} thread(s))`,
  );
  console.log(`wall time      : ${wall.toFixed(1)} s (first submit to last result)`);
  console.log(`throughput     : ${(burst / wall).toFixed(3)} jobs/s`);
  console.log(
    `wait (queue_ms): p50 ${quantile(waits, 0.5).toFixed(1)} s, p95 ${quantile(waits, 0.95).toFixed(1)} s`,
  );
  console.log(
    `run (run_ms)   : p50 ${quantile(runs, 0.5).toFixed(2)} s, p95 ${quantile(runs, 0.95).toFixed(2)} s`,
  );
  console.log(
    `failed         : ${failed.length}${failed[0] ? ` (first: ${JSON.stringify(failed[0].error)})` : ""}`,
  );
  console.log(
    `ceiling        : ${ceiling.toFixed(3)} session.run/s alone; the burst ran at ${((burst / wall / ceiling) * 100).toFixed(1)}% of it`,
  );
} finally {
  child.kill("SIGTERM");
  await new Promise((resolve) => child.once("exit", resolve));
  rmSync(dir, { recursive: true, force: true });
}

/** The model alone, before the server starts: runs a second on an input made once. */
async function sessionRunRate(runs: number): Promise<number> {
  const [rmbg] = await resolveModels(null, {
    cacheDir: join(dir, "model-cache"),
    include: ["rmbg"],
  });
  const file = toModelConfigs([rmbg!]).rmbg!.file!;
  const session = await sessionFactory("cpu", Number(values.threads))(file);
  const input = new ort.Tensor(
    "float32",
    new Float32Array(3 * 1024 * 1024).fill(0.1),
    [1, 3, 1024, 1024],
  );
  const feeds = { [session.inputNames[0]!]: input };
  const fetches = [session.outputNames[0]!];
  await session.run(feeds, fetches);
  const begin = performance.now();
  for (let i = 0; i < runs; i++) await session.run(feeds, fetches);
  const rate = runs / ((performance.now() - begin) / 1000);
  await session.release();
  return rate;
}

interface Job {
  status: string;
  error: unknown;
  metrics: { queue_ms: number; run_ms: number | null };
}

async function finished(api: (path: string) => Promise<Response>, id: string): Promise<Job> {
  for (;;) {
    const job = (await (await api(`/v1/jobs/${id}`)).json()) as Job;
    if (["succeeded", "failed", "canceled", "expired"].includes(job.status)) return job;
    await pause(500);
  }
}

function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function started(process: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    let text = "";
    const look = (chunk: Buffer) => {
      text += chunk.toString();
      if (text.includes("waiting for jobs")) resolve();
    };
    process.stdout?.on("data", look);
    process.stderr?.on("data", look);
    process.once("exit", (code) => reject(new Error(`gantry start exited ${code}:\n${text}`)));
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
