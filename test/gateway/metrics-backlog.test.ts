import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect, it } from "vitest";
import { createGatewayMetrics } from "../../gateway/runtime/node/metrics.ts";
import { startTestGateway } from "../helpers/test-gateway.ts";

/**
 * An operator watching the Grafana dashboard's "Queue depth" under a backlog saw 8: the
 * queue holds only each model's release window, the rest of a model's jobs wait in the
 * store, and /metrics said how many only for every model at once (gantry_gateway_jobs). A
 * model's queued and running jobs are now a metric of their own, on that panel.
 */
it("reports each model's backlog, which the queue's depth does not show", async () => {
  const gateway = await startTestGateway({ models: ["noop", "ocr"] });
  try {
    for (let n = 0; n < 20; n++) {
      const response = await gateway.api("/v1/jobs", {
        method: "POST",
        json: { model: "noop", input: {} },
      });
      expect(response.status).toBe(202);
    }
    const text = await (await createGatewayMetrics(gateway.gateway).handler()).text();
    const sample = (series: string) =>
      text
        .split("\n")
        .find((line) => line.startsWith(`${series} `))
        ?.slice(series.length + 1);
    expect(sample('gantry_gateway_queue_depth{model="noop",state="ready"}')).toBe("8");
    expect(sample('gantry_gateway_model_jobs{model="noop",state="queued"}')).toBe("20");
    expect(sample('gantry_gateway_model_jobs{model="noop",state="running"}')).toBe("0");
    expect(sample('gantry_gateway_model_jobs{model="ocr",state="queued"}')).toBe("0");
  } finally {
    await gateway.close();
  }
});

it("shows that backlog on the dashboard's queue depth panel", () => {
  const dashboard = JSON.parse(
    readFileSync(join(import.meta.dirname, "../../infra/grafana/gantry-dashboard.json"), "utf8"),
  ) as { panels: { title: string; targets: { expr: string }[] }[] };
  const panel = dashboard.panels.find((candidate) => candidate.title === "Queue depth");
  expect(panel?.targets.map((target) => target.expr).join("\n")).toContain(
    'gantry_gateway_model_jobs{state="queued"}',
  );
});
