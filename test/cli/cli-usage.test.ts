import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import type { Job, UsageReport } from "../../shared/protocol/index.ts";
import { startTestAgent } from "../helpers/test-agent.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * `gantry usage` against a gateway and a real agent (a runner child on the CPU): the agent
 * measures each run's device time and reports it; the usage the CLI prints is exactly the
 * sum of the jobs' `metrics.gpu_ms`.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry.js");
const exec = promisify(execFile);

let gw: TestGateway;
let agent: AgentHandle;

beforeAll(async () => {
  gw = await startTestGateway({ models: ["noop"] });
  agent = await startTestAgent(gw, { models: ["noop"], executionProviders: "cpu" });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

async function gantry(...args: string[]) {
  const { stdout } = await exec(process.execPath, [BIN, ...args], {
    env: { ...process.env, GANTRY_URL: gw.url, GANTRY_KEY: gw.apiKey },
  });
  return stdout;
}

describe("gantry usage", () => {
  it("prints the device time a real agent measured, exactly its jobs' gpu_ms", async () => {
    const jobs: Job[] = [];
    for (const delay of [30, 60, 90]) {
      const response = await gw.api("/v1/jobs", {
        method: "POST",
        headers: { prefer: "wait=30" },
        json: { model: "noop", input: { delay_ms: delay } },
      });
      const job = (await response.json()) as Job;
      expect(job.status).toBe("succeeded");
      jobs.push(job);
    }
    for (const job of jobs) {
      // The runner's own time on the device: at least the model's sleep.
      expect(job.metrics?.gpu_ms).toBeGreaterThan(0);
      expect(job.metrics).toMatchObject({ provider: "cpu", device: expect.any(String) });
    }
    const billedMs = jobs.reduce((sum, job) => sum + (job.metrics?.gpu_ms ?? 0), 0);

    const report = JSON.parse(await gantry("usage", "--json", "--by", "model")) as UsageReport;
    expect(report.data).toEqual([
      { model: "noop", jobs: 3, gpu_seconds: billedMs / 1000, wasted_gpu_seconds: 0 },
    ]);

    const text = await gantry("usage");
    const today = new Date().toISOString().slice(0, 10);
    expect(text).toMatch(
      new RegExp(`^noop\\s+${today}\\s+3\\s+${(billedMs / 1000).toFixed(3)}`, "m"),
    );
    expect(text).toMatch(/^total\s/m);
  });
});
