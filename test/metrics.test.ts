import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SUBMIT_PHASES } from "../gateway/context.ts";
import { createGatewayMetrics, GATEWAY_METRIC_NAMES } from "../gateway/metrics-node.ts";
import type { ExecutionProvider } from "../gpu-agent/inference/types.ts";
import { AGENT_METRIC_NAMES, type ClaimedEvent, createAgentMetrics } from "../gpu-agent/metrics.ts";
import { serveAgentMetrics, startMetricsServer } from "../gpu-agent/metrics-server.ts";
import type { SupervisorEvent, SupervisorStatus } from "../gpu-agent/supervisor-types.ts";
import { startTestGateway } from "./helpers/test-gateway.ts";

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
    const gateway = await startTestGateway({ models: ["noop", "ocr"] });
    try {
      const metrics = createGatewayMetrics(gateway.gateway);
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

      // The Node gateway's own /metrics also times the accepted submit's phases.
      const served = await (await fetch(`${gateway.url}/metrics`)).text();
      for (const phase of SUBMIT_PHASES) {
        const series = `gantry_gateway_submit_phase_seconds_count{phase="${phase}"}`;
        expect(sample(served, series), series).toBe(1);
      }
    } finally {
      await gateway.close();
    }
  });
});

describe("Grafana dashboard", () => {
  const dashboard = JSON.parse(
    readFileSync(
      join(import.meta.dirname, "..", "infra", "grafana", "gantry-dashboard.json"),
      "utf8",
    ),
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
  it("does nothing without a port and serves the agent's metrics with one", async () => {
    const source = { supervisor: fakeSupervisor(), runners: [] };
    const off = await serveAgentMetrics(undefined, source, { info: () => {} });
    await off.stop();
    const lines: string[] = [];
    const on = await serveAgentMetrics(0, source, { info: () => {} }, (line) => lines.push(line));
    try {
      const port = Number(/:(\d+)\/metrics$/.exec(lines[0] ?? "")?.[1]);
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(sample(text, "gantry_agent_slots")).toBe(2);
    } finally {
      await on.stop();
    }
  });
});
