import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { GPU_METRIC_NAMES, registerGpuMetrics } from "./metrics-gpus.ts";
import type { Runner } from "./runner/types.ts";
import type { Supervisor, SupervisorEvent } from "./supervisor/types.ts";

/**
 * The agent's Prometheus metric names: the Grafana dashboard and its test use this list, so
 * a renamed metric cannot silently leave a panel empty.
 */
export const AGENT_METRIC_NAMES = [
  "gantry_agent_jobs_total",
  "gantry_agent_queue_wait_seconds",
  "gantry_agent_run_seconds",
  "gantry_agent_runner_restarts_total",
  "gantry_agent_execution_provider",
  "gantry_agent_slots",
  "gantry_agent_slots_busy",
  "gantry_agent_jobs_held",
  ...GPU_METRIC_NAMES,
] as const;

/**
 * Emitted by the supervisor once the gateway granted a claim, with the job's `created_at`
 * from the claim: the only clock on the publish side an agent can see. Until the supervisor
 * emits it, the queue-wait histogram stays empty (rather than guessing).
 */
export interface ClaimedEvent {
  type: "claimed";
  jobId: string;
  attempt: number;
  /** The job's `created_at` (ISO 8601), from the claim. */
  createdAt: string;
}

export interface AgentMetricsOptions {
  supervisor: Pick<Supervisor, "on" | "status">;
  runners: readonly Pick<Runner, "provider" | "restarts">[];
  /** Milliseconds since the epoch; tests pin it. */
  now?: () => number;
  /** Monotonic milliseconds for run times; tests pin it. */
  monotonic?: () => number;
  /** Each GPU's readings (nvidia-smi by default); tests stub it. */
  readGpus?: Parameters<typeof registerGpuMetrics>[2];
}

export interface AgentMetrics {
  registry: Registry;
  /** Stops listening to the supervisor. */
  close(): void;
}

// GPU jobs run from tens of milliseconds (a classifier) to minutes (a large OCR page set).
const RUN_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
// Queue wait spans from instant (idle GPUs) to hours (a backlog).
const WAIT_BUCKETS = [0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200];

/**
 * The agent's metrics, fed by supervisor events (outcomes, run times, queue wait) and read
 * from the supervisor and runners on each scrape (slots, restarts, provider), so a scrape
 * always shows the present and nothing polls between scrapes.
 */
export function createAgentMetrics(options: AgentMetricsOptions): AgentMetrics {
  const { supervisor, runners } = options;
  const now = options.now ?? Date.now;
  const monotonic = options.monotonic ?? (() => performance.now());
  const registry = new Registry();
  const registers = [registry];

  const jobs = new Counter({
    name: "gantry_agent_jobs_total",
    help: "Deliveries settled, by outcome (succeeded, retried, dead-lettered, refused, released).",
    labelNames: ["outcome"],
    registers,
  });
  const queueWait = new Histogram({
    name: "gantry_agent_queue_wait_seconds",
    help: "From job creation to this agent's first claim of it.",
    buckets: WAIT_BUCKETS,
    registers,
  });
  const runTime = new Histogram({
    name: "gantry_agent_run_seconds",
    help: "From a runner starting the job to the delivery being settled, by model and outcome.",
    labelNames: ["model", "outcome"],
    buckets: RUN_BUCKETS,
    registers,
  });
  new Counter({
    name: "gantry_agent_runner_restarts_total",
    help: "Runner child processes restarted after a crash or out-of-memory, by runner.",
    labelNames: ["runner"],
    registers,
    collect() {
      // Each runner counts its own restarts monotonically: copy them at scrape time.
      this.reset();
      runners.forEach((runner, index) => {
        this.inc({ runner: String(index) }, runner.restarts);
      });
    },
  });
  new Gauge({
    name: "gantry_agent_execution_provider",
    help: "Runners on each execution provider (cuda, cpu); cpu on a GPU host means CUDA failed.",
    labelNames: ["provider"],
    registers,
    collect() {
      this.reset();
      for (const runner of runners) if (runner.provider) this.inc({ provider: runner.provider });
    },
  });
  new Gauge({
    name: "gantry_agent_slots",
    help: "Runner slots on this agent.",
    registers,
    collect() {
      this.set(supervisor.status().slots);
    },
  });
  new Gauge({
    name: "gantry_agent_slots_busy",
    help: "Runner slots running a job now.",
    registers,
    collect() {
      this.set(supervisor.status().busy);
    },
  });

  /** Jobs held while the gateway is unreachable, by the call they wait to make (supervisor/hold.ts). */
  const held = new Map<string, "claim" | "report">();
  new Gauge({
    name: "gantry_agent_jobs_held",
    help: "Jobs this agent holds, retrying their claim or report, while the gateway is unreachable.",
    labelNames: ["call"],
    registers,
    collect() {
      this.reset();
      this.set({ call: "claim" }, 0);
      this.set({ call: "report" }, 0);
      for (const call of held.values()) this.inc({ call });
    },
  });

  /** Jobs on a runner: keyed by job and attempt, since a retry may land on this agent again. */
  const running = new Map<string, { startedAt: number; model: string }>();
  const key = (event: { jobId: string; attempt: number }) => `${event.jobId}#${event.attempt}`;

  const unsubscribe = supervisor.on((event: SupervisorEvent | ClaimedEvent) => {
    switch (event.type) {
      case "holding":
        held.set(key(event), event.call);
        return;
      case "claimed": {
        held.delete(key(event));
        // Later attempts waited for a retry delay, not for a GPU: they would skew the figure.
        const created = Date.parse(event.createdAt);
        if (event.attempt === 1 && Number.isFinite(created)) {
          queueWait.observe(Math.max(0, now() - created) / 1000);
        }
        return;
      }
      case "running": {
        const model =
          supervisor.status().inFlight.find((job) => job.jobId === event.jobId)?.model ?? "unknown";
        running.set(key(event), { startedAt: monotonic(), model });
        return;
      }
      case "settled": {
        held.delete(key(event));
        jobs.inc({ outcome: event.outcome });
        const started = running.get(key(event));
        if (!started) return;
        running.delete(key(event));
        runTime.observe(
          { model: started.model, outcome: event.outcome },
          (monotonic() - started.startedAt) / 1000,
        );
        return;
      }
      default:
        return;
    }
  });

  const unsubscribeGpus = registerGpuMetrics(registry, supervisor, options.readGpus);
  return {
    registry,
    close() {
      unsubscribe();
      unsubscribeGpus();
    },
  };
}
