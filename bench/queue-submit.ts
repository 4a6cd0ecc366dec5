/**
 * `POST /v1/jobs` under load: accepted jobs/s and p50/p99 latency at 64 concurrent
 * connections, the gateway on Node in its own process, on Postgres + RabbitMQ (falls back
 * to the sql queue on Postgres when RabbitMQ is unreachable, and says so). By default one
 * `gantry-agent run` (one slot, look-ahead 200) drains the jobs as they come, as on a real
 * box, where the submits share the CPU with the agents they feed (issue 29: the target is
 * for that case); `--agent off` measures the accept path alone (validate, commit, publish
 * with confirm).
 *
 *   npx tsx bench/queue-submit.ts [--connections 64] [--seconds 10] [--warmup 2]
 *                                 [--agent on|off]
 */
import { parseArgs } from "node:util";
import { cpuPerJob, cpuSnapshot } from "./lib/queue-cpu.ts";
import { httpClient, ms, percentile, startStack, submitJob } from "./lib/queue-harness.ts";
import { describePhases, readPhases } from "./lib/submit-phases.ts";

const { values } = parseArgs({
  options: {
    connections: { type: "string", default: "64" },
    seconds: { type: "string", default: "10" },
    warmup: { type: "string", default: "2" },
    agent: { type: "string", default: "on" },
  },
});
const connections = Number(values.connections);
const say = (line: string) => console.log(`[queue-submit] ${line}`);

const draining = values.agent !== "off";
const stack = await startStack(say);
const pool = httpClient(stack.url, connections);
try {
  if (draining) {
    say("starting an agent process to drain the jobs (one slot, look-ahead 200)…");
    await stack.startAgent({ slots: 1, lookahead: 200 });
  }
  /** Keeps `connections` requests in flight for `seconds`; returns the latencies. */
  const hammer = async (seconds: number) => {
    const latencies: number[] = [];
    const until = performance.now() + seconds * 1000;
    let n = 0;
    const worker = async () => {
      while (performance.now() < until) {
        latencies.push((await submitJob(pool, stack.apiKey, { n: n++ })).latencyMs);
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: connections }, worker));
    return { latencies, elapsedS: (performance.now() - started) / 1000 };
  };

  say(`warming up for ${values.warmup} s…`);
  await hammer(Number(values.warmup));
  say(`${connections} connections for ${values.seconds} s…`);
  const phasesBefore = await readPhases(stack.metricsUrl);
  const cpuBefore = cpuSnapshot(stack.pids());
  const { latencies, elapsedS } = await hammer(Number(values.seconds));
  const cpuLine = cpuPerJob(cpuBefore, cpuSnapshot(stack.pids()), latencies.length);
  const phasesAfter = await readPhases(stack.metricsUrl);
  const rate = latencies.length / elapsedS;
  say(
    `accepted ${latencies.length} jobs in ${elapsedS.toFixed(1)} s: ${rate.toFixed(0)} jobs/s; ` +
      `latency p50 ${ms(percentile(latencies, 50))}, p99 ${ms(percentile(latencies, 99))}, ` +
      `max ${ms(percentile(latencies, 100))} (${stack.description}, ${connections} connections, ` +
      `${draining ? "an agent draining" : "no agent"})`,
  );
  say(
    draining
      ? `target: ≥ 3000 jobs/s with an agent draining (${rate.toFixed(0)})`
      : `targets: ≥ 5000 jobs/s (${rate.toFixed(0)}), p99 < 20 ms (${ms(percentile(latencies, 99))}) at 64 connections`,
  );
  say(cpuLine);
  const meanMs = latencies.reduce((sum, value) => sum + value, 0) / latencies.length;
  say(describePhases(phasesBefore, phasesAfter, meanMs));
} finally {
  await pool.close();
  await stack.close();
}
