/**
 * Where a job's time goes in the agent, from the agent's own timings: the supervisor's
 * events (claimed, running with the time the job waited for a runner, settled), the runner
 * child's stages per batch (`onBatch`: prepare, wait for the device, device, post-process,
 * and the IPC round trip around them), and the gateway and queue calls, timed where the
 * supervisor makes them. Everything is a `performance.now()` or two per call.
 */
import type { GatewayClient } from "../../gpu-agent/gateway/client.ts";
import type { RunnerBatchStats } from "../../gpu-agent/runner/types.ts";
import type { SupervisorEvent } from "../../gpu-agent/supervisor/index.ts";
import type { JobQueue } from "../../shared/queue/port.ts";

interface JobMarks {
  delivered?: number;
  claimStart?: number;
  claimEnd?: number;
  /** Handed to a runner, and how long it had waited for one. */
  dispatched?: number;
  waitedMs?: number;
  reportStart?: number;
  reportEnd?: number;
  ackStart?: number;
  ackEnd?: number;
}

/** Mean milliseconds per job of each step, and per batch of the child's stages. */
export interface ProfileSummary {
  jobs: number;
  perJob: Record<string, number>;
  batches: number;
  meanBatch: number;
  perBatch: Record<string, number>;
}

export class AgentProfile {
  private marks = new Map<string, JobMarks>();
  private batches: RunnerBatchStats[] = [];

  reset(): void {
    this.marks.clear();
    this.batches = [];
  }

  private mark(jobId: string): JobMarks {
    const marks = this.marks.get(jobId) ?? {};
    this.marks.set(jobId, marks);
    return marks;
  }

  /** For `createChildRunner({ onBatch })`. */
  readonly onBatch = (stats: RunnerBatchStats) => {
    this.batches.push(stats);
  };

  /** For `supervisor.on`. */
  readonly onEvent = (event: SupervisorEvent) => {
    if (event.type !== "running") return;
    const marks = this.mark(event.jobId);
    marks.dispatched = performance.now();
    marks.waitedMs = event.waitedMs ?? 0;
  };

  /** The gateway client with its claims and reports timed. */
  gateway(client: GatewayClient): GatewayClient {
    const timed = async <T>(
      jobId: string,
      start: keyof JobMarks,
      end: keyof JobMarks,
      work: () => Promise<T>,
    ) => {
      this.mark(jobId)[start] = performance.now();
      try {
        return await work();
      } finally {
        this.mark(jobId)[end] = performance.now();
      }
    };
    return {
      get agentId() {
        return client.agentId;
      },
      enroll: () => client.enroll(),
      register: (registration) => client.register(registration),
      agentHeartbeat: (status) => client.agentHeartbeat(status),
      heartbeat: (jobId, attempt) => client.heartbeat(jobId, attempt),
      claim: (jobId, attempt) =>
        timed(jobId, "claimStart", "claimEnd", () => client.claim(jobId, attempt)),
      report: (jobId, event) =>
        timed(jobId, "reportStart", "reportEnd", () => client.report(jobId, event)),
    };
  }

  /** The queue with each delivery's arrival and its ack timed. */
  queue(queue: JobQueue): JobQueue {
    const profile = this;
    return new Proxy(queue, {
      get(target, key, receiver) {
        if (key !== "consume") return Reflect.get(target, key, receiver);
        const consume: JobQueue["consume"] = (handler, options) =>
          target.consume((delivery) => {
            const marks = profile.mark(delivery.message.id);
            marks.delivered = performance.now();
            const ack = delivery.ack.bind(delivery);
            delivery.ack = async () => {
              marks.ackStart = performance.now();
              await ack();
              marks.ackEnd = performance.now();
            };
            return handler(delivery);
          }, options);
        return consume;
      },
    });
  }

  summary(): ProfileSummary {
    const sums: Record<string, number> = {};
    const add = (name: string, value: number | undefined) => {
      if (value !== undefined && Number.isFinite(value)) sums[name] = (sums[name] ?? 0) + value;
    };
    let jobs = 0;
    for (const m of this.marks.values()) {
      if (m.ackEnd === undefined) continue;
      jobs++;
      add("delivery → claim", diff(m.delivered, m.claimStart));
      add("claim", diff(m.claimStart, m.claimEnd));
      add("download", diff(m.claimEnd, m.dispatched) - (m.waitedMs ?? 0));
      add("wait for runner", m.waitedMs);
      add("runner (IPC + child)", diff(m.dispatched, m.reportStart));
      add("report", diff(m.reportStart, m.reportEnd));
      add("ack", diff(m.ackStart, m.ackEnd));
      add("total (latency)", diff(m.delivered, m.ackEnd));
    }
    const perJob = Object.fromEntries(
      Object.entries(sums).map(([k, v]) => [k, v / Math.max(1, jobs)]),
    );
    const batchSums: Record<string, number> = {};
    for (const b of this.batches) {
      const stages = {
        "IPC both ways": b.roundTripMs - b.childMs,
        prepare: b.timings?.prepareMs,
        "queue to device": b.timings?.queueMs,
        device: b.timings?.deviceMs,
        "post-process": b.timings?.finishMs,
      };
      for (const [k, v] of Object.entries(stages)) batchSums[k] = (batchSums[k] ?? 0) + (v ?? 0);
    }
    const n = Math.max(1, this.batches.length);
    const size = this.batches.reduce((sum, b) => sum + b.size, 0);
    return {
      jobs,
      perJob,
      batches: this.batches.length,
      meanBatch: size / n,
      perBatch: Object.fromEntries(Object.entries(batchSums).map(([k, v]) => [k, v / n])),
    };
  }
}

const diff = (from: number | undefined, to: number | undefined) =>
  from === undefined || to === undefined ? Number.NaN : to - from;

/** One line per step: `name  1.23 ms`. */
export function formatSummary(summary: ProfileSummary, indent = "  "): string[] {
  const lines = [`${indent}per job (mean of ${summary.jobs}, ms; steps overlap across jobs):`];
  for (const [k, v] of Object.entries(summary.perJob))
    lines.push(`${indent}  ${k.padEnd(22)} ${v.toFixed(2)}`);
  lines.push(
    `${indent}per batch in the runner (mean of ${summary.batches}, ${summary.meanBatch.toFixed(1)} jobs each, ms):`,
  );
  for (const [k, v] of Object.entries(summary.perBatch))
    lines.push(`${indent}  ${k.padEnd(22)} ${v.toFixed(2)}`);
  return lines;
}
