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
import { parseArgs } from "node:util";
import { bullmq, redisClientInstalled } from "./queue-bullmq-peer.ts";
import { cpuSnapshot } from "./queue-cpu.ts";
import {
  httpClient,
  ms,
  type Stack,
  startStack,
  submitJob,
  waitSucceeded,
} from "./queue-harness.ts";
import { type Figures, loadShapes, type System } from "./queue-load.ts";

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
const { paced, saturated, warmUp } = loadShapes({ rate, connections, say });

async function gantry(stack: Stack): Promise<System> {
  const pool = httpClient(stack.url, connections);
  return {
    name: "Gantry",
    cpu: () => cpuSnapshot(stack.pids()),
    submit: (n) => submitJob(pool, stack.apiKey, { n }),
    finishedAt: (ids) => waitSucceeded(stack.db, ids, say),
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

if (values.only !== "gantry" && !redisClientInstalled()) {
  say(
    "BullMQ peer skipped: BullMQ 6 needs the `ioredis` package, which is not installed " +
      "(npm install --save-dev ioredis)",
  );
} else if (values.only !== "gantry") {
  results.BullMQ = {};
  for (const phase of ["paced", "saturated"] as const) {
    const peer = await bullmq(phase, Number(values["bullmq-concurrency"]));
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
  const ratio =
    (ours.saturated?.jobsPerSecond ?? Number.NaN) / (peer.saturated?.jobsPerSecond ?? 1);
  say(
    `targets: ≥ 2500 jobs/s at saturation (${ours.saturated?.jobsPerSecond.toFixed(0)}) and ` +
      `≥ ×0.4 of BullMQ (×${ratio.toFixed(2)}); p99 < 25 ms at ${rate}/s (${ms(ours.paced?.p99 ?? Number.NaN)})`,
  );
}
process.exit(0);
