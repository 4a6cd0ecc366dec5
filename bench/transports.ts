/**
 * One comparison in one run: no-op jobs end to end (POST /v1/jobs → stored → the queue →
 * an agent's claim → its runner child → the report → succeeded) on every transport Gantry
 * speaks on this machine, with BullMQ on Redis doing the same no-op as the peer. Per
 * transport: saturated throughput, p50/p99 latency at a paced rate, and the CPU each job
 * cost (milliseconds summed over the gateway, the agent and its runner, the broker
 * processes and this load generator). Each stack is the gateway and one agent (1 slot,
 * `--lookahead` jobs held beyond it) as separate processes; the job store is Postgres
 * except for sql-sqlite, whose queue and store are one SQLite file.
 *
 * The phases are short so the whole comparison stays bounded (about 30 s per transport):
 * with 5 s at 200/s a p99 is the 10th slowest of 1000 jobs, so one hiccup of the VM moves
 * it; compare transports within one run, not across runs. The brokers (Postgres, RabbitMQ,
 * Redis, NATS) are the machine's shared ones: their CPU includes whatever else uses them.
 *
 *   npx tsx bench/transports.ts [--rate 200] [--seconds 5] [--jobs 2000] [--lookahead 200]
 *                               [--connections 64] [--only sql-sqlite,redis,…,bullmq]
 */
import { parseArgs } from "node:util";
import { bullmq, redisClientInstalled } from "./lib/bullmq-peer.ts";
import { descentIn, readStats } from "./lib/queue-cpu.ts";
import { httpClient, ms, submitJob, waitSucceeded } from "./lib/queue-harness.ts";
import { type Figures, loadShapes, type System } from "./lib/queue-load.ts";
import {
  BROKER_PROCESS,
  startTransportStack,
  TRANSPORTS,
  type Transport,
} from "./lib/transports-stack.ts";

const { values } = parseArgs({
  options: {
    rate: { type: "string", default: "200" },
    seconds: { type: "string", default: "5" },
    jobs: { type: "string", default: "2000" },
    lookahead: { type: "string", default: "200" },
    connections: { type: "string", default: "64" },
    only: { type: "string" },
  },
});
const rate = Number(values.rate);
const pacedJobs = rate * Number(values.seconds);
const saturationJobs = Number(values.jobs);
const connections = Number(values.connections);
const wanted = new Set((values.only ?? [...TRANSPORTS, "bullmq"].join(",")).split(","));
const say = (line: string) => console.log(`[transports] ${line}`);
const { paced, saturated, warmUp } = loadShapes({ rate, connections, say: () => {} });

/** CPU seconds now of this process, its descendants, and every process named in `brokers`. */
function cpuSeconds(brokers: readonly string[]): number {
  const stats = readStats();
  const descendsFrom = descentIn(stats);
  return stats
    .filter((s) => descendsFrom(s, [process.pid]) || brokers.includes(s.comm))
    .reduce((sum, s) => sum + s.cpuSeconds, 0);
}

interface Row {
  name: string;
  saturated: Figures;
  paced: Figures;
  cpuMsPerJob: number;
}

/** Warm-up, the paced phase, then the saturated one; CPU over both measured phases. */
async function measure(name: string, system: System, brokers: readonly string[]): Promise<Row> {
  await warmUp(system);
  const before = cpuSeconds(brokers);
  const pacedFigures = await paced(system, pacedJobs);
  const saturatedFigures = await saturated(system, saturationJobs);
  const cpuMsPerJob = ((cpuSeconds(brokers) - before) * 1000) / (pacedJobs + saturationJobs);
  const row = { name, paced: pacedFigures, saturated: saturatedFigures, cpuMsPerJob };
  say(
    `${name}: ${saturatedFigures.jobsPerSecond.toFixed(0)} jobs/s saturated; at ${rate}/s p50 ` +
      `${ms(pacedFigures.p50)} p99 ${ms(pacedFigures.p99)}; ${cpuMsPerJob.toFixed(2)} ms CPU/job`,
  );
  return row;
}

const rows: Row[] = [];
for (const transport of TRANSPORTS.filter((t) => wanted.has(t))) {
  say(`${transport}: starting the gateway and an agent…`);
  const stack = await startTransportStack(transport, { lookahead: Number(values.lookahead) });
  try {
    const pool = httpClient(stack.url, connections);
    const system: System = {
      name: transport,
      submit: (n) => submitJob(pool, stack.apiKey, { n }),
      finishedAt: (ids) => waitSucceeded(stack.db, ids, () => {}),
    };
    const broker = BROKER_PROCESS[transport as Transport];
    const brokers = [
      ...(broker ? [broker] : []),
      ...(transport === "sql-sqlite" ? [] : ["postgres"]),
    ];
    rows.push(await measure(transport, system, [...new Set(brokers)]));
    await pool.close();
  } finally {
    await stack.close();
  }
}

if (wanted.has("bullmq") && redisClientInstalled()) {
  // BullMQ's peer makes a fresh queue and worker per phase; both phases here use one each.
  const peerPaced = await bullmq("paced", 16, say, false);
  let pacedFigures: Figures;
  let pacedCpu: number;
  try {
    await warmUp(peerPaced.system);
    const before = cpuSeconds(["redis-server"]);
    pacedFigures = await paced(peerPaced.system, pacedJobs);
    // Read before close(): the phase's worker process ends with it, and its CPU with it.
    pacedCpu = cpuSeconds(["redis-server"]) - before;
  } finally {
    await peerPaced.close();
  }
  const peerSaturated = await bullmq("saturated", 16, say, false);
  try {
    const before = cpuSeconds(["redis-server"]);
    const saturatedFigures = await saturated(peerSaturated.system, saturationJobs);
    const saturatedCpu = cpuSeconds(["redis-server"]) - before;
    const cpuMsPerJob = ((pacedCpu + saturatedCpu) * 1000) / (pacedJobs + saturationJobs);
    rows.push({
      name: "BullMQ (peer)",
      paced: pacedFigures,
      saturated: saturatedFigures,
      cpuMsPerJob,
    });
    say(`BullMQ: ${saturatedFigures.jobsPerSecond.toFixed(0)} jobs/s saturated`);
  } finally {
    await peerSaturated.close();
  }
}

const peer = rows.find((row) => row.name.startsWith("BullMQ"));
say(
  `one run: ${saturationJobs} jobs saturated (${connections} clients), ${pacedJobs} paced at ${rate}/s; ` +
    "1 agent × 1 slot per Gantry stack",
);
console.log(
  "| transport | saturated jobs/s | p50 at %d/s | p99 at %d/s | CPU ms/job |".replaceAll(
    "%d",
    String(rate),
  ),
);
console.log("| --- | --- | --- | --- | --- |");
for (const row of rows) {
  const ratio =
    peer && row !== peer
      ? ` (×${(row.saturated.jobsPerSecond / peer.saturated.jobsPerSecond).toFixed(2)})`
      : "";
  console.log(
    `| ${row.name} | ${row.saturated.jobsPerSecond.toFixed(0)}${ratio} | ${ms(row.paced.p50)} | ` +
      `${ms(row.paced.p99)} | ${row.cpuMsPerJob.toFixed(2)} |`,
  );
}
process.exit(0);
