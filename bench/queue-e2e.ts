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
 * A job is finished when the load generator hears so (`--completions heard`, the default, as
 * issue 29 measured): Gantry's completions on one `GET /v1/events` stream, BullMQ's on its
 * `QueueEvents`. `--completions stamped` takes the systems' own finish stamps instead (no
 * listener: what the systems cost without one).
 *
 * Then the rows each job wrote to Postgres, the warm-up's jobs counted with the rest, table by
 * table (bench/lib/pg-writes.ts).
 *
 * The paced phase lasts 30 s (6000 jobs at 200/s): a p99 over 2000 jobs is the 20th slowest,
 * so a single 100 ms hiccup of the VM or the broker would decide it on its own.
 *
 *   npx tsx bench/queue-e2e.ts [--rate 200] [--seconds 30] [--jobs 5000] [--agents 1]
 *                              [--slots 1] [--lookahead 200] [--connections 64]
 *                              [--bullmq-concurrency 16] [--queue-type quorum|classic]
 *                              [--tracing off|on|both]
 *                              [--completions heard|stamped]
 *
 * `--tracing both` runs Gantry twice, tracing off then on (OpenTelemetry over OTLP
 * http/protobuf to a local endpoint that only counts what it gets, bench/lib/otlp-sink.ts),
 * and prints what tracing costs: throughput and latency on against off.
 */
import { parseArgs } from "node:util";
import { bullmq, redisClientInstalled } from "./lib/bullmq-peer.ts";
import { readStatements, statementsPerJob } from "./lib/db-statements.ts";
import { gantryFeedReads, hearGantry } from "./lib/heard.ts";
import { startOtlpSink } from "./lib/otlp-sink.ts";
import { writeCounts, writesPerJob } from "./lib/pg-writes.ts";
import { cpuSnapshot, wakeupSnapshot } from "./lib/queue-cpu.ts";
import {
  httpClient,
  ms,
  type Stack,
  startStack,
  submitJob,
  waitSucceeded,
} from "./lib/queue-harness.ts";
import { type Figures, loadShapes, type System } from "./lib/queue-load.ts";

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
    tracing: { type: "string", default: "off" },
    completions: { type: "string", default: "heard" },
  },
});
if (values.completions !== "heard" && values.completions !== "stamped") {
  throw new Error(`--completions is heard or stamped, not ${values.completions}`);
}
const heard = values.completions === "heard";
const rate = Number(values.rate);
const pacedJobs = rate * Number(values.seconds);
const saturationJobs = Number(values.jobs);
const connections = Number(values.connections);
const say = (line: string) => console.log(`[queue-e2e] ${line}`);
const { paced, saturated, warmUp } = loadShapes({ rate, connections, say });

async function gantry(stack: Stack): Promise<{ system: System; close(): Promise<void> }> {
  const pool = httpClient(stack.url, connections);
  const listener = heard ? await hearGantry(stack.url, stack.apiKey, say) : null;
  const system: System = {
    name: "Gantry",
    cpu: () => cpuSnapshot(stack.pids()),
    wakeups: () => wakeupSnapshot(stack.pids()),
    submit: (n) => submitJob(pool, stack.apiKey, { n }),
    async finishedAt(ids) {
      // Heard is what counts; the gateway's stamps still say where the time went (the legs),
      // read once all were heard.
      const heardAt = await listener?.finishedAt(ids);
      const stamped = await waitSucceeded(stack.db, ids, say);
      if (!heardAt) return stamped;
      for (const [id, stamps] of stamped) {
        stamps.reportedAt = stamps.finishedAt;
        stamps.finishedAt = heardAt.get(id)?.finishedAt ?? Number.NaN;
      }
      return stamped;
    },
  };
  return {
    system,
    async close() {
      await listener?.close();
      await pool.close();
    },
  };
}

const results: Record<string, { paced?: Figures; saturated?: Figures }> = {};

/** One Gantry stack measured, its processes traced to a local OTLP endpoint when `traced`. */
async function measureGantry(name: string, traced: boolean) {
  const sink = traced ? await startOtlpSink() : null;
  // The gateway and agent processes inherit these (bench/lib/queue-harness.ts).
  if (sink) {
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = sink.url;
    process.env.OTEL_EXPORTER_OTLP_PROTOCOL = "http/protobuf";
  }
  const stack = await startStack(say, {
    queueType: values["queue-type"] === "classic" ? "classic" : "quorum",
  });
  const closers: (() => Promise<void>)[] = [];
  try {
    const agents = Number(values.agents);
    say(`${name}: starting ${agents} agent process(es) with ${values.slots} slot(s) each…`);
    const lookahead = Number(values.lookahead);
    for (let i = 0; i < agents; i++) {
      await stack.startAgent({ slots: Number(values.slots), lookahead });
    }
    const tested = await gantry(stack);
    closers.push(tested.close);
    const system = { ...tested.system, name };
    // Counted from before the warm-up, whose jobs are of the same two shapes: reading the
    // counters takes seconds of quiet (pg-writes.ts), which a running system never has, so it
    // does not stand between the warm-up and the phases measured.
    const writesBefore = stack.postgres ? await writeCounts(stack.db, say) : null;
    const warmUpJobs = await warmUp(system);
    const reads = heard ? await gantryFeedReads(stack.metricsUrl) : 0;
    const statements = await readStatements(stack.metricsUrl);
    const paced_ = await paced(system, pacedJobs);
    report(name, "paced", paced_);
    const pacedReads = heard ? await gantryFeedReads(stack.metricsUrl) : 0;
    const pacedStatements = await readStatements(stack.metricsUrl);
    const saturated_ = await saturated(system, saturationJobs);
    report(name, "saturated", saturated_);
    const endStatements = await readStatements(stack.metricsUrl);
    say(
      `  the gateway's database statements per job: paced ${statementsPerJob(statements, pacedStatements, pacedJobs)}; ` +
        `saturated ${statementsPerJob(pacedStatements, endStatements, saturationJobs)}`,
    );
    if (heard) {
      const end = await gantryFeedReads(stack.metricsUrl);
      say(
        `  the event stream's store reads per job: paced ${((pacedReads - reads) / pacedJobs).toFixed(2)}, ` +
          `saturated ${((end - pacedReads) / saturationJobs).toFixed(2)}`,
      );
    }
    results[name] = { paced: paced_, saturated: saturated_ };
    if (writesBefore) {
      const writesAfter = await writeCounts(stack.db, say);
      const jobs = warmUpJobs + pacedJobs + saturationJobs;
      for (const line of writesPerJob(writesBefore, writesAfter, jobs)) {
        say(line);
      }
    }
    say(
      `${name} ran on ${stack.description}; ${agents} agent(s) × ${values.slots} slot(s), ` +
        `look-ahead ${values.lookahead}; completions ${values.completions}`,
    );
  } finally {
    for (const close of closers) await close();
    await stack.close();
    if (sink) {
      say(
        `${name}: the OTLP endpoint took ${sink.exports} exports, ${(sink.bytes / 1e6).toFixed(1)} MB`,
      );
      delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
      delete process.env.OTEL_EXPORTER_OTLP_PROTOCOL;
      await sink.close();
    }
  }
}

if (values.only !== "bullmq") {
  if (values.tracing !== "on") await measureGantry("Gantry", false);
  if (values.tracing !== "off") await measureGantry("Gantry traced", true);
  const off = results.Gantry;
  const on = results["Gantry traced"];
  if (off && on) compare("tracing (on / off)", on, off);
}

if (values.only !== "gantry" && !redisClientInstalled()) {
  say(
    "BullMQ peer skipped: BullMQ 6 needs the `ioredis` package, which is not installed " +
      "(npm install --save-dev ioredis)",
  );
} else if (values.only !== "gantry") {
  results.BullMQ = {};
  for (const phase of ["paced", "saturated"] as const) {
    const peer = await bullmq(phase, Number(values["bullmq-concurrency"]), say, heard);
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

/** Each phase of `a` against `b`: throughput, p50 and p99, with the ratios. */
function compare(title: string, a: (typeof results)[string], b: (typeof results)[string]) {
  say(`${title}:`);
  for (const phase of ["paced", "saturated"] as const) {
    const x = a[phase];
    const y = b[phase];
    if (!x || !y) continue;
    say(
      `  ${phase.padEnd(9)} throughput ${x.jobsPerSecond.toFixed(0)} / ${y.jobsPerSecond.toFixed(0)} jobs/s ` +
        `(×${(x.jobsPerSecond / y.jobsPerSecond).toFixed(2)}); p50 ${ms(x.p50)} / ${ms(y.p50)}; ` +
        `p99 ${ms(x.p99)} / ${ms(y.p99)} (×${(x.p99 / y.p99).toFixed(1)}); whole-box CPU per job ` +
        `${x.boxCpuMs.toFixed(2)} / ${y.boxCpuMs.toFixed(2)} ms (×${(x.boxCpuMs / y.boxCpuMs).toFixed(1)}); ` +
        `context switches per job ${x.boxSwitches.toFixed(1)} / ${y.boxSwitches.toFixed(1)} ` +
        `(×${(x.boxSwitches / y.boxSwitches).toFixed(1)})`,
    );
  }
}

const ours = results.Gantry ?? results["Gantry traced"];
const peer = results.BullMQ;
if (ours && peer) {
  compare("summary (Gantry / BullMQ)", ours, peer);
  const ratio =
    (ours.saturated?.jobsPerSecond ?? Number.NaN) / (peer.saturated?.jobsPerSecond ?? 1);
  const cpuRatio = (phase: "paced" | "saturated") =>
    ((ours[phase]?.boxCpuMs ?? Number.NaN) / (peer[phase]?.boxCpuMs ?? 1)).toFixed(1);
  say(
    `targets (issue 29): saturated ≥ ×0.5 of BullMQ (×${ratio.toFixed(2)}); p99 ≤ 25 ms at ` +
      `${rate}/s (${ms(ours.paced?.p99 ?? Number.NaN)}); whole-box CPU per job ≤ ×2 of BullMQ's ` +
      `paced (×${cpuRatio("paced")}) and ≤ ×1.5 saturated (×${cpuRatio("saturated")})`,
  );
}
process.exit(0);
