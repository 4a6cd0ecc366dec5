/**
 * No-op jobs end to end, submit to `succeeded`: throughput and p50/p99 latency at a paced
 * 200 jobs/s and at saturation, for Gantry (gateway on Node, Postgres + RabbitMQ, agents as
 * separate `gantry-agent` processes, each job through the HTTP API, a claim, the runner
 * child process and a report; claims and reports batched as they queue up) next to BullMQ
 * on Redis doing the same no-op as the peer (its worker in a separate process too), with
 * the ratio.
 *
 * One slot by default: a slot is a runner process, there to keep one GPU (or stream) busy. A
 * no-op has no use for several, and on two cores every extra process that wakes for a job
 * costs CPU the rest of the stack needs (measured: 4 slots cost ~0.5 ms more CPU per job at
 * 200/s, and p99 rose with it, with no gain at saturation).
 *
 * The agents claim up to `--lookahead` jobs beyond their slots (GANTRY_LOOKAHEAD): a no-op
 * takes no time, so only many jobs in flight hide the round trips to the gateway, as
 * BullMQ's worker hides Redis's with its concurrency. Throughput is at most the jobs an agent
 * holds divided by the time each spends in it (claim, run, report, ack, each batched behind
 * the request in flight: tens of ms at saturation), so the look-ahead, not the CPU, capped it
 * at 60 (measured: 866–911 jobs/s with 60 against 1297–1314 with 200, at less CPU per job,
 * the batches being larger). For GPU jobs the default (one per slot) is right.
 *
 * The paced phase lasts 30 s (6000 jobs at 200/s): a p99 over 2000 jobs is the 20th slowest,
 * so a single 100 ms hiccup of the VM or the broker would decide it on its own.
 *
 *   npx tsx bench/queue-e2e.ts [--rate 200] [--seconds 30] [--jobs 5000] [--agents 1]
 *                              [--slots 1] [--lookahead 200] [--connections 64]
 *                              [--bullmq-concurrency 16] [--queue-type quorum|classic]
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { Queue } from "bullmq";
import { randomToken } from "../shared/ids.ts";
import { type CpuGroups, cpuPerJob, cpuSnapshot } from "./queue-cpu.ts";
import {
  httpClient,
  type JobStamps,
  ms,
  percentile,
  type Stack,
  startStack,
  submitJob,
  waitSucceeded,
} from "./queue-harness.ts";

const { values } = parseArgs({
  options: {
    rate: { type: "string", default: "200" },
    seconds: { type: "string", default: "30" },
    jobs: { type: "string", default: "5000" },
    agents: { type: "string", default: "1" },
    slots: { type: "string", default: "1" },
    lookahead: { type: "string", default: "200" },
    connections: { type: "string", default: "64" },
    "bullmq-concurrency": { type: "string", default: "16" },
    only: { type: "string" },
    "queue-type": { type: "string", default: "quorum" },
  },
});
const rate = Number(values.rate);
const pacedJobs = rate * Number(values.seconds);
const saturationJobs = Number(values.jobs);
const connections = Number(values.connections);
const say = (line: string) => console.log(`[queue-e2e] ${line}`);

/** One system under test: how to submit a no-op job, and when each one finished. */
interface System {
  name: string;
  /** CPU seconds per process group now, when the system knows its processes. */
  cpu?: () => CpuGroups;
  submit(n: number): Promise<{ id: string; sentAt: number }>;
  /** When each job finished; where the system stamps them, when it was stored and started too. */
  finishedAt(ids: string[]): Promise<Map<string, Partial<JobStamps> & { finishedAt: number }>>;
}

interface Figures {
  jobsPerSecond: number;
  p50: number;
  p99: number;
}

async function measure(
  system: System,
  sent: { id: string; sentAt: number }[],
  cpuBefore: CpuGroups | undefined,
  quiet: boolean,
): Promise<Figures> {
  const finished = await system.finishedAt(sent.map((job) => job.id));
  if (cpuBefore && system.cpu) say(`  ${cpuPerJob(cpuBefore, system.cpu(), sent.length)}`);
  const latencies = sent.map(
    (job) => (finished.get(job.id)?.finishedAt ?? Number.NaN) - job.sentAt,
  );
  if (!quiet) sayLegs(sent, finished);
  const first = Math.min(...sent.map((job) => job.sentAt));
  const last = Math.max(...[...finished.values()].map((stamps) => stamps.finishedAt));
  return {
    jobsPerSecond: sent.length / ((last - first) / 1000),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

/**
 * Where the latency went, from the system's own stamps: submit → stored (the gateway's
 * insert), stored → started (publish, broker, the agent's claim), started → finished (the
 * runner and the report).
 */
function sayLegs(
  sent: { id: string; sentAt: number }[],
  finished: Map<string, Partial<JobStamps> & { finishedAt: number }>,
) {
  const legs = { stored: [] as number[], started: [] as number[], finished: [] as number[] };
  for (const job of sent) {
    const stamps = finished.get(job.id);
    if (stamps?.createdAt === undefined || stamps.startedAt === undefined) return;
    legs.stored.push(stamps.createdAt - job.sentAt);
    legs.started.push(stamps.startedAt - stamps.createdAt);
    legs.finished.push(stamps.finishedAt - stamps.startedAt);
  }
  const leg = (name: string, values: number[]) =>
    `${name} p50 ${ms(percentile(values, 50))} p99 ${ms(percentile(values, 99))}`;
  say(
    `  legs: ${leg("submit→stored", legs.stored)}; ${leg("stored→started", legs.started)}; ` +
      leg("started→finished", legs.finished),
  );
}

/** Submits at `rate` jobs/s, on schedule, whatever the answers' latency. */
async function paced(system: System, count: number, { quiet = false } = {}): Promise<Figures> {
  if (!quiet) say(`${system.name}: ${count} jobs paced at ${rate}/s…`);
  const cpuBefore = quiet ? undefined : system.cpu?.();
  const started = performance.now();
  const pending: Promise<{ id: string; sentAt: number }>[] = [];
  for (let i = 0; i < count; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    pending.push(system.submit(i));
  }
  return measure(system, await Promise.all(pending), cpuBefore, quiet);
}

/** Submits `count` jobs as fast as `connections` concurrent clients can. */
async function saturated(system: System, count: number, { quiet = false } = {}): Promise<Figures> {
  if (!quiet) say(`${system.name}: ${count} jobs as fast as ${connections} clients submit…`);
  const cpuBefore = quiet ? undefined : system.cpu?.();
  const sent: { id: string; sentAt: number }[] = [];
  let next = 0;
  const client = async () => {
    while (next < count) sent.push(await system.submit(next++));
  };
  await Promise.all(Array.from({ length: connections }, client));
  return measure(system, sent, cpuBefore, quiet);
}

/**
 * Both load shapes, unmeasured, before measuring: a burst, then two seconds at the paced
 * rate. The first seconds of a new shape run code V8 has not optimised yet (single-job
 * batches, timers), and the figures should say what a running system does.
 */
async function warmUp(system: System): Promise<void> {
  say(`${system.name}: warming up (200 jobs at once, then 2 s at ${rate}/s)…`);
  await saturated(system, 200, { quiet: true });
  await paced(system, rate * 2, { quiet: true });
}

async function gantry(stack: Stack): Promise<System> {
  const pool = httpClient(stack.url, connections);
  return {
    name: "Gantry",
    cpu: () => cpuSnapshot(stack.pids()),
    submit: (n) => submitJob(pool, stack.apiKey, { n }),
    finishedAt: (ids) => waitSucceeded(stack.db, ids, say),
  };
}

/** BullMQ on the local Redis, its worker in another process. */
async function bullmq(phase: string) {
  const connection = { host: process.env.REDIS_HOST ?? "127.0.0.1", port: 6379 };
  const name = `gantry-bench-${phase}-${randomToken(6).replace(/[^A-Za-z0-9]/g, "x")}`;
  const queue = new Queue(name, { connection });
  const worker = spawn(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "queue-bullmq-worker.ts")],
    {
      env: {
        ...process.env,
        BENCH_BULLMQ: JSON.stringify({
          queue: name,
          concurrency: Number(values["bullmq-concurrency"]),
          ...connection,
        }),
      },
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: worker.stdout! }).on("line", (line) => {
      if (line === "READY") resolve();
    });
    worker.once("exit", () => reject(new Error("the BullMQ worker exited")));
  });
  const system: System = {
    name: "BullMQ",
    async submit(n) {
      const sentAt = Date.now();
      const job = await queue.add("noop", { n });
      return { id: job.id ?? "", sentAt };
    },
    async finishedAt(ids) {
      const wanted = new Set(ids);
      const finished = new Map<string, { finishedAt: number }>();
      while (finished.size < wanted.size) {
        for (const job of await queue.getJobs(["completed"], 0, -1)) {
          if (job.id && wanted.has(job.id) && job.finishedOn) {
            finished.set(job.id, { finishedAt: job.finishedOn });
          }
        }
        if (finished.size < wanted.size) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      return finished;
    },
  };
  return {
    system,
    async close() {
      worker.kill("SIGTERM");
      await once(worker, "exit");
      await queue.obliterate({ force: true });
      await queue.close();
    },
  };
}

const results: Record<string, { paced?: Figures; saturated?: Figures }> = {};

if (values.only !== "bullmq") {
  const stack = await startStack(say, {
    queueType: values["queue-type"] === "classic" ? "classic" : "quorum",
  });
  try {
    const agents = Number(values.agents);
    say(`starting ${agents} agent process(es) with ${values.slots} slot(s) each…`);
    const lookahead = Number(values.lookahead);
    for (let i = 0; i < agents; i++) {
      await stack.startAgent({ slots: Number(values.slots), lookahead });
    }
    const system = await gantry(stack);
    await warmUp(system);
    results.Gantry = { paced: await paced(system, pacedJobs) };
    report("Gantry", "paced", results.Gantry.paced!);
    results.Gantry.saturated = await saturated(system, saturationJobs);
    report("Gantry", "saturated", results.Gantry.saturated);
    say(
      `Gantry ran on ${stack.description}; ${agents} agent(s) × ${values.slots} slot(s), ` +
        `look-ahead ${values.lookahead}`,
    );
  } finally {
    await stack.close();
  }
}

/** BullMQ 6 needs a Redis client installed beside it; without one there is no peer. */
function redisClientInstalled(): boolean {
  try {
    createRequire(import.meta.url).resolve("ioredis");
    return true;
  } catch {
    return false;
  }
}

if (values.only !== "gantry" && !redisClientInstalled()) {
  say(
    "BullMQ peer skipped: BullMQ 6 needs the `ioredis` package, which is not installed " +
      "(npm install --save-dev ioredis)",
  );
} else if (values.only !== "gantry") {
  results.BullMQ = {};
  for (const phase of ["paced", "saturated"] as const) {
    const peer = await bullmq(phase);
    try {
      await warmUp(peer.system);
      const figures =
        phase === "paced"
          ? await paced(peer.system, pacedJobs)
          : await saturated(peer.system, saturationJobs);
      results.BullMQ[phase] = figures;
      report("BullMQ", phase, figures);
    } finally {
      await peer.close();
    }
  }
}

function report(name: string, phase: string, figures: Figures) {
  say(
    `${name} ${phase}: ${figures.jobsPerSecond.toFixed(0)} jobs/s end to end; ` +
      `latency p50 ${ms(figures.p50)}, p99 ${ms(figures.p99)}`,
  );
}

const ours = results.Gantry;
const peer = results.BullMQ;
if (ours && peer) {
  say("summary (Gantry / BullMQ):");
  for (const phase of ["paced", "saturated"] as const) {
    const a = ours[phase];
    const b = peer[phase];
    if (!a || !b) continue;
    say(
      `  ${phase.padEnd(9)} throughput ${a.jobsPerSecond.toFixed(0)} / ${b.jobsPerSecond.toFixed(0)} jobs/s ` +
        `(×${(a.jobsPerSecond / b.jobsPerSecond).toFixed(2)}); p50 ${ms(a.p50)} / ${ms(b.p50)}; ` +
        `p99 ${ms(a.p99)} / ${ms(b.p99)} (×${(a.p99 / b.p99).toFixed(1)})`,
    );
  }
  say(
    `targets: ≥ 1000 jobs/s at saturation (${ours.saturated?.jobsPerSecond.toFixed(0)}), ` +
      `p99 < 50 ms at ${rate}/s (${ms(ours.paced?.p99 ?? Number.NaN)})`,
  );
}
process.exit(0);
