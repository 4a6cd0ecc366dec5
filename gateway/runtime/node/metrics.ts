import {
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  type Metric,
  Registry,
} from "prom-client";
import { STATEMENT_KINDS, statementKind } from "../../../shared/db/statement-log.ts";
import { JobStatus } from "../../../shared/protocol/job.ts";
import type { Gateway, SubmitPhase } from "../../context.ts";
import {
  RETENTION_FAILURE_REASONS,
  RETENTION_KINDS,
  retentionStats,
} from "../../sweep/retention/stats.ts";

/**
 * The gateway's Prometheus metric names (Node only: prom-client needs Node). The Grafana
 * dashboard's test checks every panel against this list.
 */
export const GATEWAY_METRIC_NAMES = [
  "gantry_gateway_jobs",
  "gantry_gateway_queue_depth",
  "gantry_gateway_model_jobs",
  "gantry_gateway_webhook_deliveries",
  "gantry_gateway_submit_phase_seconds",
  "gantry_gateway_db_statements_total",
] as const;

/** What a webhook delivery row's `state` can be; zero-filled so a panel never has gaps. */
const DELIVERY_STATES = ["pending", "delivered", "failed", "skipped"] as const;

export interface GatewayMetrics {
  registry: Registry;
  /** Answers `GET /metrics`: the Prometheus text format, collected now. */
  handler(): Promise<Response>;
}

type MetricsSource = Pick<Gateway, "stores" | "queue" | "models" | "log" | "feed">;

/**
 * Gauges read from the job store and the queue when Prometheus scrapes, never between
 * scrapes: the database and the broker are the truth, shared by every gateway replica, so
 * each replica reports the same figures and nothing drifts from counting events in memory.
 * A source that fails is logged and left out of that scrape rather than failing all of it.
 */
export function createGatewayMetrics(
  gateway: MetricsSource,
  /** Metrics made before the gateway existed (submitPhases). */
  made: Metric[] = [],
): GatewayMetrics {
  const registry = new Registry();
  const registers = [registry];
  for (const metric of made) registry.registerMetric(metric);
  // The process's memory, CPU and event-loop lag (prom-client's defaults): a gateway that
  // grows or stalls shows on the same dashboard. An embedded agent's metrics join these and
  // add none of their own (gpu-agent/metrics-server.ts).
  collectDefaultMetrics({ register: registry });
  const warn = (what: string, error: unknown) =>
    gateway.log.warn({ err: String(error) }, `metrics: could not read ${what}`);

  new Gauge({
    name: "gantry_gateway_jobs",
    help: "Jobs in the job store, by state.",
    labelNames: ["state"],
    registers,
    async collect() {
      this.reset();
      try {
        const counts = await gateway.stores.jobs.countsByStatus();
        for (const state of JobStatus.options) this.set({ state }, 0);
        for (const [state, count] of counts) this.set({ state }, count);
      } catch (error) {
        warn("job counts", error);
      }
    },
  });

  /** A gauge of `states` for each served model, from one read per model per scrape. */
  const perModel = (
    name: string,
    help: string,
    what: string,
    read: (model: string) => Promise<Record<string, number>>,
  ) =>
    new Gauge({
      name,
      help,
      labelNames: ["model", "state"],
      registers,
      async collect() {
        this.reset();
        await Promise.all(
          [...gateway.models.keys()].map(async (model) => {
            try {
              for (const [state, n] of Object.entries(await read(model))) {
                this.set({ model, state }, n);
              }
            } catch (error) {
              warn(`${what} of ${model}`, error);
            }
          }),
        );
      },
    });

  // One call per served model: least-privilege queue credentials may not list queues.
  perModel(
    "gantry_gateway_queue_depth",
    "Messages in each model's queue: ready, unacked (delivered, not settled), delayed, dead.",
    "queue depth",
    async (model) => {
      const depth = await gateway.queue.depth(model);
      return {
        ready: depth.ready,
        unacked: depth.inFlight,
        delayed: depth.delayed,
        dead: depth.dead,
      };
    },
  );

  // The queue holds only each model's release window; the backlog waits in the store, and
  // only this says how deep it is per model (what a dashboard or an autoscaler needs).
  perModel(
    "gantry_gateway_model_jobs",
    "Jobs of each model in the job store, queued (released to the queue or not) and running.",
    "job counts",
    async (model) => {
      const counts = await gateway.stores.jobs.modelJobCounts(model);
      return { queued: counts.queued, running: counts.running };
    },
  );

  new Gauge({
    name: "gantry_gateway_webhook_deliveries",
    help: "Webhook deliveries recorded, by outcome (pending, delivered, failed, skipped).",
    labelNames: ["outcome"],
    registers,
    async collect() {
      this.reset();
      try {
        const counts = await gateway.stores.webhooks.countsByState();
        for (const outcome of DELIVERY_STATES) this.set({ outcome }, 0);
        for (const [outcome, count] of counts) this.set({ outcome }, count);
      } catch (error) {
        warn("webhook deliveries", error);
      }
    },
  });

  // The event streams are this process's own: each replica reports its streams.
  new Gauge({
    name: "gantry_gateway_event_streams",
    help: "GET /v1/events streams open on this gateway.",
    registers,
    collect() {
      this.set(gateway.feed.stats.openStreams);
    },
  });
  for (const [name, help, read] of [
    ["events_sent", "Events written to closed GET /v1/events streams.", "eventsSent"],
    ["event_resumes", "GET /v1/events streams opened with Last-Event-ID.", "resumes"],
    ["event_streams_dropped", "Streams closed for falling too far behind.", "dropped"],
    ["event_feed_reads", "Store reads by the per-tenant event readers.", "reads"],
  ] as const) {
    new Counter({
      name: `gantry_gateway_${name}_total`,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(gateway.feed.stats[read]);
      },
    });
  }

  // Retention's work is counted by the gateway that did it (retention/stats.ts).
  const retention = retentionStats(gateway);
  for (const [name, help, read] of [
    ["rows", "Rows retention deleted or cleared, by kind.", retention.rows],
    ["bytes", "Blob bytes retention deleted, by kind.", retention.bytes],
  ] as const) {
    new Counter({
      name: `gantry_gateway_retention_${name}_removed_total`,
      help,
      labelNames: ["kind"],
      registers,
      collect() {
        this.reset();
        for (const kind of RETENTION_KINDS) this.inc({ kind }, read[kind]);
      },
    });
  }
  new Counter({
    name: "gantry_gateway_retention_failures_total",
    help: "Deletes retention could not do, by reason; their rows were kept and are retried later, with backoff.",
    labelNames: ["reason"],
    registers,
    collect() {
      this.reset();
      for (const reason of RETENTION_FAILURE_REASONS)
        this.inc({ reason }, retention.failed[reason]);
    },
  });

  return {
    registry,
    async handler() {
      const body = await registry.metrics();
      return new Response(body, { headers: { "content-type": registry.contentType } });
    },
  };
}

/**
 * Where an accepted `POST /v1/jobs` spends its time (the gateway's `observeSubmit`), by
 * phase. Made before the gateway, which takes `observe`; handed to createGatewayMetrics.
 */
export function submitPhases(): {
  metric: Histogram<"phase">;
  observe(phase: SubmitPhase, seconds: number): void;
} {
  const metric = new Histogram({
    name: "gantry_gateway_submit_phase_seconds",
    help: "Time an accepted POST /v1/jobs spent in each phase: checks, commit (the group commit it rode in), publish (the queue's confirm).",
    labelNames: ["phase"],
    buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [],
  });
  return { metric, observe: (phase, seconds) => metric.observe({ phase }, seconds) };
}

/**
 * The statements the gateway sends its database, by what they begin with (`select`,
 * `insert`, `update`, `delete`, `with`, `other`): divided by the jobs finished, the round
 * trips a job costs, the figure that sets a gateway's CPU per job at ordinary load. Made
 * before the database is opened, which takes `count`; handed to createGatewayMetrics.
 */
export function databaseStatements(): {
  metric: Counter<"statement">;
  count(sql: string): void;
} {
  const metric = new Counter({
    name: "gantry_gateway_db_statements_total",
    help: "Statements the gateway sent its database (migrations, BEGIN and COMMIT included), by their first word.",
    labelNames: ["statement"],
    registers: [],
  });
  for (const statement of STATEMENT_KINDS) metric.inc({ statement }, 0);
  return { metric, count: (sql) => metric.inc({ statement: statementKind(sql) }) };
}
