import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SUBMIT_PHASES } from "../../gateway/context.ts";
import { createGatewayMetrics, GATEWAY_METRIC_NAMES } from "../../gateway/runtime/node/metrics.ts";
import { sweepRetention } from "../../gateway/sweep/retention/sweep-retention.ts";
import type { ExecutionProvider } from "../../gpu-agent/inference/types.ts";
import {
  AGENT_METRIC_NAMES,
  type ClaimedEvent,
  createAgentMetrics,
} from "../../gpu-agent/metrics.ts";
import { serveAgentMetrics, startMetricsServer } from "../../gpu-agent/metrics-server.ts";
import type { SupervisorEvent, SupervisorStatus } from "../../gpu-agent/supervisor/types.ts";
import { newId } from "../../shared/ids.ts";
import type { MetricsSource } from "../../shared/metrics-server.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/** A supervisor stand-in: tests emit its events and set its status by hand. */
function fakeSupervisor() {
  const listeners = new Set<(event: SupervisorEvent | ClaimedEvent) => void>();
  const status: SupervisorStatus = {
    state: "running",
    slots: 2,
    busy: 0,
    waiting: 0,
    provider: "cpu",
    runners: [],
    inFlight: [],
  };
  return {
    status: () => status,
    on(listener: (event: SupervisorEvent) => void) {
      const wide = listener as (event: SupervisorEvent | ClaimedEvent) => void;
      listeners.add(wide);
      return () => listeners.delete(wide);
    },
    emit: (event: SupervisorEvent | ClaimedEvent) => {
      for (const listener of listeners) listener(event);
    },
    state: status,
  };
}

/** The value of one sample line in the Prometheus text format, by its name and labels. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("agent metrics", () => {
  it("counts outcomes, times runs and queue wait, and reads slots, restarts and provider", async () => {
    const supervisor = fakeSupervisor();
    const runners: { provider: ExecutionProvider | null; restarts: number }[] = [
      { provider: "cpu", restarts: 0 },
      { provider: "cpu", restarts: 2 },
    ];
    let clock = 0;
    const metrics = createAgentMetrics({
      supervisor,
      runners,
      now: () => Date.parse("2030-01-01T00:00:03.000Z"),
      monotonic: () => clock,
    });

    supervisor.emit({
      type: "claimed",
      jobId: "job_a",
      attempt: 1,
      createdAt: "2030-01-01T00:00:00.000Z",
    });
    supervisor.emit({
      type: "claimed",
      jobId: "job_b",
      attempt: 2,
      createdAt: "2029-01-01T00:00:00Z",
    });
    supervisor.state.inFlight.push({
      jobId: "job_a",
      attempt: 1,
      model: "ocr",
      phase: "running",
      since: "2030-01-01T00:00:00.000Z",
    });
    supervisor.emit({ type: "running", jobId: "job_a", attempt: 1, runner: 0, pid: 1, batch: 1 });
    supervisor.state.busy = 1;
    clock = 1500;
    supervisor.emit({
      type: "settled",
      jobId: "job_a",
      attempt: 1,
      outcome: "succeeded",
      error: null,
    });
    supervisor.emit({
      type: "settled",
      jobId: "job_c",
      attempt: 1,
      outcome: "refused",
      error: null,
    });

    const text = await metrics.registry.metrics();
    expect(sample(text, 'gantry_agent_jobs_total{outcome="succeeded"}')).toBe(1);
    expect(sample(text, 'gantry_agent_jobs_total{outcome="refused"}')).toBe(1);
    // Only the first attempt's wait counts: a retry waited for its backoff, not a GPU.
    expect(sample(text, "gantry_agent_queue_wait_seconds_count")).toBe(1);
    expect(sample(text, "gantry_agent_queue_wait_seconds_sum")).toBe(3);
    // A refused job never ran: it has an outcome but no run time.
    expect(sample(text, 'gantry_agent_run_seconds_count{model="ocr",outcome="succeeded"}')).toBe(1);
    expect(sample(text, 'gantry_agent_run_seconds_sum{model="ocr",outcome="succeeded"}')).toBe(1.5);
    expect(sample(text, "gantry_agent_slots")).toBe(2);
    expect(sample(text, "gantry_agent_slots_busy")).toBe(1);
    expect(sample(text, 'gantry_agent_runner_restarts_total{runner="1"}')).toBe(2);
    expect(sample(text, 'gantry_agent_execution_provider{provider="cpu"}')).toBe(2);

    // Read on each scrape: a restart and a fallback show without any event.
    runners[0] = { provider: "cuda", restarts: 1 };
    const later = await metrics.registry.metrics();
    expect(sample(later, 'gantry_agent_runner_restarts_total{runner="0"}')).toBe(1);
    expect(sample(later, 'gantry_agent_execution_provider{provider="cuda"}')).toBe(1);
    expect(sample(later, 'gantry_agent_execution_provider{provider="cpu"}')).toBe(1);

    metrics.close();
    supervisor.emit({
      type: "settled",
      jobId: "job_d",
      attempt: 1,
      outcome: "succeeded",
      error: null,
    });
    expect(
      sample(await metrics.registry.metrics(), 'gantry_agent_jobs_total{outcome="succeeded"}'),
    ).toBe(1);
  });

  it("serves /metrics over HTTP and nothing else", async () => {
    const metrics = createAgentMetrics({ supervisor: fakeSupervisor(), runners: [] });
    const server = await startMetricsServer(0, metrics.registry, "127.0.0.1");
    try {
      const response = await fetch(`http://127.0.0.1:${server.port}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toContain("text/plain");
      expect(await response.text()).toContain("# TYPE gantry_agent_slots_busy gauge");
      expect((await fetch(`http://127.0.0.1:${server.port}/`)).status).toBe(404);
    } finally {
      await server.close();
    }
  });
});

describe("gateway metrics", () => {
  it("reports jobs by state, queue depth per model and webhook outcomes from the store", async () => {
    const gateway = await startTestGateway({ models: ["noop", "ocr"], metricsPort: 0 });
    try {
      const metrics = createGatewayMetrics(gateway.gateway);
      const inserts = 'gantry_gateway_db_statements_total{statement="insert"}';
      const servedBefore = await (await fetch(gateway.metricsUrl ?? "")).text();
      const response = await gateway.api("/v1/jobs", {
        method: "POST",
        json: { model: "noop", input: {} },
      });
      expect(response.status).toBe(202);

      const scrape = await metrics.handler();
      expect(scrape.headers.get("content-type")).toContain("text/plain");
      const text = await scrape.text();
      expect(sample(text, 'gantry_gateway_jobs{state="queued"}')).toBe(1);
      expect(sample(text, 'gantry_gateway_jobs{state="succeeded"}')).toBe(0);
      expect(sample(text, 'gantry_gateway_queue_depth{model="noop",state="ready"}')).toBe(1);
      expect(sample(text, 'gantry_gateway_queue_depth{model="noop",state="unacked"}')).toBe(0);
      expect(sample(text, 'gantry_gateway_queue_depth{model="ocr",state="ready"}')).toBe(0);
      expect(sample(text, 'gantry_gateway_webhook_deliveries{outcome="delivered"}')).toBe(0);

      // The Node gateway's metrics listener also times the accepted submit's phases.
      const served = await (await fetch(gateway.metricsUrl ?? "")).text();
      for (const phase of SUBMIT_PHASES) {
        const series = `gantry_gateway_submit_phase_seconds_count{phase="${phase}"}`;
        expect(sample(served, series), series).toBe(1);
      }
      // And counts the statements it sent its database: the submit's insert among them.
      expect(sample(servedBefore, inserts)).toBeGreaterThan(0);
      expect(sample(served, inserts)).toBeGreaterThan(sample(servedBefore, inserts) ?? 0);
      expect(
        sample(served, 'gantry_gateway_db_statements_total{statement="select"}'),
      ).toBeGreaterThan(0);
    } finally {
      await gateway.close();
    }
  });
});

describe("Grafana dashboard", () => {
  const dashboard = JSON.parse(
    readFileSync(join(import.meta.dirname, "../../infra/grafana/gantry-dashboard.json"), "utf8"),
  ) as { title: string; panels: { title: string; targets: { expr: string }[] }[] };
  const registered = new Set<string>([...AGENT_METRIC_NAMES, ...GATEWAY_METRIC_NAMES]);

  it("has the panels an operator needs", () => {
    const titles = dashboard.panels.map((panel) => panel.title);
    for (const wanted of [
      "Throughput by outcome",
      "Run time p50 / p99",
      "Queue depth",
      "Slots busy",
      "Runner restarts",
      "Webhook deliveries by outcome",
    ]) {
      expect(titles).toContain(wanted);
    }
  });

  it("queries only metrics the code registers", () => {
    for (const panel of dashboard.panels) {
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
      for (const { expr } of panel.targets) {
        const names = expr.match(/\bgantry_[a-z_]+/g) ?? [];
        expect(names.length, `${panel.title}: ${expr}`).toBeGreaterThan(0);
        for (const name of names) {
          // Histograms are queried through their _bucket/_sum/_count series.
          const base = name.replace(/_(bucket|sum|count)$/, "");
          expect(registered.has(name) || registered.has(base), `${panel.title}: ${name}`).toBe(
            true,
          );
        }
      }
    }
  });
});

describe("serveAgentMetrics", () => {
  /** Listening sockets this process holds (a metrics listener is one). */
  const listeners = () =>
    process.getActiveResourcesInfo().filter((kind) => kind === "TCPServerWrap").length;

  it("does nothing without a port: no listener, no metrics, no line", async () => {
    const supervisor = fakeSupervisor();
    let subscribed = 0;
    const source = {
      supervisor: {
        ...supervisor,
        on(listener: (event: SupervisorEvent) => void) {
          subscribed++;
          return supervisor.on(listener);
        },
      },
      runners: [],
    };
    const said: string[] = [];
    const before = listeners();
    for (const port of [undefined, null]) {
      const off = await serveAgentMetrics(
        { port, host: "127.0.0.1" },
        source,
        { info: (...args: unknown[]) => said.push(JSON.stringify(args)) },
        (line) => said.push(line),
        () => {
          said.push("hosted");
          return () => {};
        },
      );
      // Nothing opened: no socket listens (one an earlier test closed may still be going
      // away), the metrics never subscribed to the supervisor, nothing was logged or shown,
      // and no host was handed the metrics.
      expect(listeners()).toBeLessThanOrEqual(before);
      expect(subscribed).toBe(0);
      expect(said).toEqual([]);
      await off.stop();
    }
  });

  it("serves the agent's metrics with a port, on a listener of its own or on a host's", async () => {
    const source = { supervisor: fakeSupervisor(), runners: [] };
    const before = listeners();
    const lines: string[] = [];
    const on = await serveAgentMetrics(
      { port: 0, host: "127.0.0.1" },
      source,
      { info: () => {} },
      (line) => lines.push(line),
    );
    try {
      expect(listeners()).toBeGreaterThan(before);
      const port = Number(/:(\d+)\/metrics$/.exec(lines[0] ?? "")?.[1]);
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(sample(text, "gantry_agent_slots")).toBe(2);
    } finally {
      await on.stop();
    }
    // A closed server's handle goes at the next turn of the loop.
    await expect.poll(listeners).toBeLessThanOrEqual(before);

    // `gantry start`: the gateway's listener holds the port; the agent's metrics join it.
    const hosted: MetricsSource[] = [];
    const joined = await serveAgentMetrics(
      { port: 9, host: "127.0.0.1" },
      source,
      { info: () => {} },
      undefined,
      (added) => {
        hosted.push(added);
        return () => hosted.splice(hosted.indexOf(added), 1);
      },
    );
    expect(listeners()).toBeLessThanOrEqual(before);
    expect(hosted).toHaveLength(1);
    expect(sample(await (hosted[0] as MetricsSource).metrics(), "gantry_agent_slots")).toBe(2);
    await joined.stop();
    expect(hosted).toHaveLength(0);
  });
});

describe("retention metrics", () => {
  it("counts retention's failures by reason, each once however often the sweep runs", async () => {
    // No timed sweeps: only the two below run.
    const gateway = await startTestGateway({ models: ["noop"], sweepIntervalMs: 3_600_000 });
    try {
      const metrics = createGatewayMetrics(gateway.gateway);
      const now = Date.now();
      const long = now - 40 * 24 * 3_600_000;
      // An upload row whose stored key the disk store refuses, never used: past its retention.
      await gateway.gateway.stores.uploads.insert({
        id: newId("upl", long),
        tenant_id: "ten_test",
        content_type: "image/png",
        size_bytes: 1,
        blob_key: "inputs/../../escape",
        created_at: long,
        expires_at: long + 3_600_000,
      });
      // A job whose output is not the JSON the gateway writes: what it names is unknown.
      const job = newId("job", long);
      await gateway.gateway.stores.jobs.insert({
        id: job,
        tenantId: "ten_test",
        model: "noop",
        priority: 1,
        input: {},
        webhook: null,
        idempotencyKey: null,
        requestHash: null,
        traceparent: null,
        now: long,
        expiresAt: long + 3_600_000,
      });
      await gateway.db
        .updateTable("jobs")
        .set({ status: "succeeded", output: "{not json", finished_at: long })
        .where("id", "=", job)
        .execute();

      await sweepRetention(gateway.gateway, now);
      // Backing off: the next sweep passes over both rows.
      await sweepRetention(gateway.gateway, now + 1000);
      const text = await (await metrics.handler()).text();
      const failures = (reason: string) =>
        sample(text, `gantry_gateway_retention_failures_total{reason="${reason}"}`);
      expect(failures("blob_key_refused")).toBe(1);
      expect(failures("unreadable_row")).toBe(1);
      expect(failures("blob_store_error")).toBe(0);
      // Both rows are kept for a later try.
      expect(
        (
          await gateway.db
            .selectFrom("jobs")
            .select("output")
            .where("id", "=", job)
            .executeTakeFirst()
        )?.output,
      ).toBe("{not json");
    } finally {
      await gateway.close();
    }
  });
});
