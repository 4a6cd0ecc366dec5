import { networkInterfaces } from "node:os";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { startAgentProcess } from "../helpers/fault-agent.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * The standalone agent's metrics listener binds GANTRY_METRICS_HOST: every interface unless
 * told (Prometheus scrapes a pod from outside it), loopback where the operator keeps it to
 * this host. It bound 0.0.0.0 whatever was set.
 */
let gw: TestGateway;
beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
}, 60_000);
afterAll(() => gw?.close());

/** An address of this host that is not loopback: where a scraper elsewhere connects. */
function outsideAddress(): string {
  const found = Object.values(networkInterfaces())
    .flat()
    .find((address) => address && address.family === "IPv4" && !address.internal);
  if (!found) throw new Error("this host has no IPv4 address but loopback");
  return found.address;
}

/** Whether a scrape at this address is answered, or its connection refused. */
async function scrapes(host: string, port: number): Promise<boolean> {
  try {
    return (await fetch(`http://${host}:${port}/metrics`)).ok;
  } catch {
    return false;
  }
}

async function agentServing(settings: Record<string, string>): Promise<string[]> {
  const lines: string[] = [];
  const agent = await startTestAgent(gw, {
    models: ["noop"],
    executionProviders: "cpu",
    settings,
    progress: (line) => lines.push(line),
  });
  onTestFinished(() => agent.stop());
  return lines;
}

describe("gantry-agent's metrics listener address", () => {
  it("keeps to loopback with GANTRY_METRICS_HOST=127.0.0.1, and says where", {
    timeout: 60_000,
  }, async () => {
    const port = 48811;
    const lines = await agentServing({
      GANTRY_METRICS_PORT: String(port),
      GANTRY_METRICS_HOST: "127.0.0.1",
    });
    expect(lines).toContain(`metrics on http://127.0.0.1:${port}/metrics`);
    expect(await scrapes("127.0.0.1", port)).toBe(true);
    expect(await scrapes(outsideAddress(), port)).toBe(false);
  });

  it("binds every interface by default, as before", { timeout: 60_000 }, async () => {
    const port = 48812;
    const lines = await agentServing({ GANTRY_METRICS_PORT: String(port) });
    expect(lines).toContain(`metrics on http://0.0.0.0:${port}/metrics`);
    expect(await scrapes(outsideAddress(), port)).toBe(true);
  });

  it("gantry-agent run binds it before enrolling and serves the agent's and the process's metrics there", {
    timeout: 60_000,
  }, async () => {
    const port = 48813;
    const agent = startAgentProcess(gw, {
      slots: 1,
      env: { GANTRY_METRICS_PORT: String(port), GANTRY_METRICS_HOST: "127.0.0.1" },
    });
    onTestFinished(() => agent.kill());
    await agent.ready();
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(text).toContain("# TYPE gantry_agent_slots ");
    expect(text).toContain("# TYPE process_cpu_seconds_total ");
    // Once each: the process's metrics are the listener's, not also the agent's registry's.
    expect(text.split("# TYPE process_cpu_seconds_total ")).toHaveLength(2);
    expect(agent.stderrTail()).toContain(`metrics on http://127.0.0.1:${port}/metrics`);
    expect(await agent.stop()).toBe(0);
  });
});
