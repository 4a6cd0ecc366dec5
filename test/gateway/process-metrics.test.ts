import { describe, expect, it, onTestFinished } from "vitest";
import { createGatewayMetrics } from "../../gateway/runtime/node/metrics.ts";
import { serveAgentMetrics } from "../../gpu-agent/metrics-server.ts";
import type { MetricsSource } from "../../shared/metrics-server.ts";
import { freePort } from "../helpers/fault-own-broker.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * The process's own figures beside Gantry's: memory, heap, CPU, event-loop lag, open handles
 * (prom-client's default metrics), so that an operator's dashboard shows a gateway or an
 * agent that grows or stalls. Once per process: the embedded agent of `gantry start` adds its
 * metrics to the gateway's listener, which already has them.
 */
const PROCESS_SERIES = [
  "process_resident_memory_bytes",
  "process_cpu_seconds_total",
  "nodejs_heap_size_used_bytes",
  "nodejs_eventloop_lag_seconds",
  "nodejs_active_handles_total",
];

const idleSupervisor = {
  status: () => ({
    state: "running" as const,
    slots: 1,
    busy: 0,
    waiting: 0,
    provider: "cpu" as const,
    runners: [],
    inFlight: [],
  }),
  on: () => () => {},
};

const quiet = { info: () => {} };

describe("process metrics", () => {
  it("are on the gateway's /metrics", async () => {
    const gw = await startTestGateway({ models: ["noop"] });
    onTestFinished(() => gw.close());
    const text = await (await createGatewayMetrics(gw.gateway).handler()).text();
    for (const series of PROCESS_SERIES) expect(text).toContain(`# TYPE ${series} `);
  });

  it("are on an agent's own metrics listener", async () => {
    const port = await freePort();
    const served = await serveAgentMetrics(
      { port, host: "127.0.0.1" },
      { supervisor: idleSupervisor, runners: [] },
      quiet,
    );
    onTestFinished(() => served.stop());
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const series of PROCESS_SERIES) expect(text).toContain(`# TYPE ${series} `);
  });

  it("are not added again by an agent whose metrics join the gateway's listener", async () => {
    let joined: MetricsSource | undefined;
    const served = await serveAgentMetrics(
      { port: 0, host: "127.0.0.1" },
      { supervisor: idleSupervisor, runners: [] },
      quiet,
      () => {},
      (source) => {
        joined = source;
        return () => {};
      },
    );
    onTestFinished(() => served.stop());
    const text = (await joined?.metrics()) ?? "";
    expect(text).toContain("gantry_agent_slots");
    for (const series of PROCESS_SERIES) expect(text).not.toContain(series);
  });
});
