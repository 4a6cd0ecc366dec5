/**
 * The load shapes the queue benchmarks put on a system, and what they measure: throughput
 * and p50/p99 latency from submit to finished, with the CPU each job cost and where its
 * latency went when the system says.
 */
import {
  boxContextSwitches,
  boxCpuSeconds,
  type CpuGroups,
  cpuPerJob,
  wakeupsPerJob,
} from "./queue-cpu.ts";
import { type JobStamps, ms, percentile } from "./queue-harness.ts";

/** One system under test: how to submit a no-op job, and when each one finished. */
export interface System {
  name: string;
  /** CPU seconds per process group now, when the system knows its processes. */
  cpu?: () => CpuGroups;
  /** Wake-ups per process group so far (`wakeupSnapshot`), when it knows them. */
  wakeups?: () => CpuGroups;
  submit(n: number): Promise<{ id: string; sentAt: number }>;
  /** When each job finished; where the system stamps them, when it was stored and started too. */
  finishedAt(ids: string[]): Promise<Map<string, Partial<JobStamps> & { finishedAt: number }>>;
}

export interface Figures {
  jobsPerSecond: number;
  p50: number;
  p99: number;
  /** Whole-box CPU ms per job over the phase, submits to the last finish (`boxCpuSeconds`). */
  boxCpuMs: number;
  /** Whole-box context switches per job over the phase (`boxContextSwitches`). */
  boxSwitches: number;
}

export interface LoadOptions {
  /** Jobs per second of the paced shape. */
  rate: number;
  /** Concurrent clients of the saturated shape. */
  connections: number;
  say: (line: string) => void;
}

export interface LoadShapes {
  paced(system: System, count: number, options?: { quiet?: boolean }): Promise<Figures>;
  saturated(system: System, count: number, options?: { quiet?: boolean }): Promise<Figures>;
  /** Resolves with the number of jobs it submitted. */
  warmUp(system: System): Promise<number>;
}

/**
 * Seconds of the paced warm-up. Two were too few for Gantry: its measured paced phase then
 * started at about twice its steady latency and took some five seconds to settle (queue-e2e
 * at 200/s, p50 per 200 ms: 20 ms falling to 11), with or without the burst before; after
 * eight, its first seconds ran as the rest.
 */
const WARM_PACED_S = 8;

export function loadShapes({ rate, connections, say }: LoadOptions): LoadShapes {
  /** What a phase reads before its first submit, to tell what it cost. */
  function before(system: System, quiet: boolean) {
    return {
      cpu: quiet ? undefined : system.cpu?.(),
      wakeups: quiet ? undefined : system.wakeups?.(),
      boxCpu: boxCpuSeconds(),
      boxSwitches: boxContextSwitches(),
    };
  }

  async function measure(
    system: System,
    sent: { id: string; sentAt: number }[],
    start: ReturnType<typeof before>,
    quiet: boolean,
  ): Promise<Figures> {
    const finished = await system.finishedAt(sent.map((job) => job.id));
    const jobs = sent.length;
    const boxCpuMs = ((boxCpuSeconds() - start.boxCpu) * 1000) / jobs;
    const boxSwitches = (boxContextSwitches() - start.boxSwitches) / jobs;
    if (start.cpu && system.cpu) say(`  ${cpuPerJob(start.cpu, system.cpu(), jobs)}`);
    if (start.wakeups && system.wakeups) {
      say(`  ${wakeupsPerJob(start.wakeups, system.wakeups(), jobs)}`);
    }
    if (!quiet) {
      say(
        `  whole-box CPU ms per job: ${boxCpuMs.toFixed(2)}; context switches per job: ${boxSwitches.toFixed(1)}`,
      );
    }
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
      boxCpuMs,
      boxSwitches,
    };
  }

  /**
   * Where the latency went, from the system's own stamps: submit → stored (the gateway's
   * insert), stored → released (Gantry's fair release pass), released → started (publish,
   * broker, the agent's claim), started → finished (the runner and the report; where the
   * finish was heard, started → reported and reported → heard, the event stream's part).
   */
  function sayLegs(
    sent: { id: string; sentAt: number }[],
    finished: Map<string, Partial<JobStamps> & { finishedAt: number }>,
  ) {
    const legs = {
      stored: [] as number[],
      released: [] as number[],
      started: [] as number[],
      finished: [] as number[],
      heard: [] as number[],
    };
    for (const job of sent) {
      const stamps = finished.get(job.id);
      if (stamps?.createdAt === undefined || stamps.startedAt === undefined) return;
      legs.stored.push(stamps.createdAt - job.sentAt);
      if (stamps.releasedAt !== undefined) {
        legs.released.push(stamps.releasedAt - stamps.createdAt);
        legs.started.push(stamps.startedAt - stamps.releasedAt);
      } else legs.started.push(stamps.startedAt - stamps.createdAt);
      if (stamps.reportedAt !== undefined) {
        legs.finished.push(stamps.reportedAt - stamps.startedAt);
        legs.heard.push(stamps.finishedAt - stamps.reportedAt);
      } else legs.finished.push(stamps.finishedAt - stamps.startedAt);
    }
    const leg = (name: string, values: number[]) =>
      `${name} p50 ${ms(percentile(values, 50))} p99 ${ms(percentile(values, 99))}`;
    // Gantry's jobs wait in its store for the fair release (issue 26) before the queue.
    const queued = legs.released.length
      ? `${leg("stored→released", legs.released)}; ${leg("released→started", legs.started)}`
      : leg("stored→started", legs.started);
    // Where the finish was heard, its leg is apart: the report's settle and the event stream.
    const done = legs.heard.length
      ? `${leg("started→reported", legs.finished)}; ${leg("reported→heard", legs.heard)}`
      : leg("started→finished", legs.finished);
    say(`  legs: ${leg("submit→stored", legs.stored)}; ${queued}; ${done}`);
  }

  /** Submits at `rate` jobs/s, on schedule, whatever the answers' latency. */
  async function paced(system: System, count: number, { quiet = false } = {}): Promise<Figures> {
    if (!quiet) say(`${system.name}: ${count} jobs paced at ${rate}/s…`);
    const start = before(system, quiet);
    const started = performance.now();
    const pending: Promise<{ id: string; sentAt: number }>[] = [];
    for (let i = 0; i < count; i++) {
      const due = started + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
      pending.push(system.submit(i));
    }
    return measure(system, await Promise.all(pending), start, quiet);
  }

  /** Submits `count` jobs as fast as `connections` concurrent clients can. */
  async function saturated(
    system: System,
    count: number,
    { quiet = false } = {},
  ): Promise<Figures> {
    if (!quiet) say(`${system.name}: ${count} jobs as fast as ${connections} clients submit…`);
    const start = before(system, quiet);
    const sent: { id: string; sentAt: number }[] = [];
    let next = 0;
    const client = async () => {
      while (next < count) sent.push(await system.submit(next++));
    };
    await Promise.all(Array.from({ length: connections }, client));
    return measure(system, sent, start, quiet);
  }

  /**
   * Both load shapes, unmeasured, before measuring: a burst, then `WARM_PACED_S` at the
   * paced rate. The first seconds of a new shape run code V8 has not optimised yet
   * (single-job batches, timers), and the figures should say what a running system does.
   */
  async function warmUp(system: System): Promise<number> {
    say(`${system.name}: warming up (200 jobs at once, then ${WARM_PACED_S} s at ${rate}/s)…`);
    await saturated(system, 200, { quiet: true });
    await paced(system, rate * WARM_PACED_S, { quiet: true });
    return 200 + rate * WARM_PACED_S;
  }

  return { paced, saturated, warmUp };
}
