import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { spawnAgentRun } from "../helpers/agent-run.ts";
import { installStubNvidiaSmi } from "../helpers/stub-nvidia-smi.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An agent whose GPU settings cannot work (GANTRY_GPUS naming a GPU the host lacks, cuda
 * alone without its library) stops at start, exit 2; but it enrolled first, so every such
 * start left an agent that "enrolled but never registered" in `gantry agents list`: a
 * crash-looping pod (the kubelet restarts it whatever its exit code) one more every restart.
 * The GPUs are now planned before the agent enrolls, and GANTRY_MODELS_FILE read.
 */
let gw: TestGateway;
let smi: ReturnType<typeof installStubNvidiaSmi>;
beforeAll(async () => {
  smi = installStubNvidiaSmi();
  gw = await startTestGateway({ models: ["noop"] });
});
afterAll(async () => {
  smi?.restore();
  await gw?.close();
});

/** Runs `gantry-agent run` with these settings beside the enrolling ones; its exit and stderr. */
async function refusedRun(settings: Record<string, string>) {
  // No execution providers given: the GPU settings are the ones refused.
  const agent = spawnAgentRun(gw, { GANTRY_EXECUTION_PROVIDERS: undefined, ...settings });
  const [code] = await agent.exited;
  return { code, stderr: agent.stderr() };
}

it("refuses a GPU it cannot see before it enrolls, leaving no agent behind", {
  timeout: 60_000,
}, async () => {
  const { code, stderr } = await refusedRun({ GANTRY_GPUS: "7" });
  expect(code, stderr).toBe(2);
  expect(stderr).toContain("GANTRY_GPUS names GPU 7, which this process cannot see");
  expect(await gw.gateway.stores.agents.list({ limit: 10 })).toEqual([]);
});

it("refuses an invalid models.yaml before it enrolls, leaving no agent behind", {
  timeout: 60_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "gantry-refused-"));
  try {
    const file = join(dir, "models.yaml");
    writeFileSync(file, "models:\n  - id: Not A Model Id\n");
    const { code, stderr } = await refusedRun({ GANTRY_MODELS_FILE: file });
    expect(code, stderr).toBe(2);
    expect(stderr).toContain(`model registry ${file} is invalid`);
    expect(await gw.gateway.stores.agents.list({ limit: 10 })).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("refuses a metrics port another process holds before it enrolls, leaving no agent behind", {
  timeout: 60_000,
}, async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "0.0.0.0", resolve));
  try {
    const { port } = taken.address() as AddressInfo;
    const { code, stderr } = await refusedRun({ GANTRY_METRICS_PORT: String(port) });
    expect(code, stderr).toBe(2);
    expect(stderr).toContain(`cannot serve metrics on port ${port} (EADDRINUSE)`);
    expect(await gw.gateway.stores.agents.list({ limit: 10 })).toEqual([]);
  } finally {
    await new Promise((resolve) => taken.close(resolve));
  }
});

it("refuses a model it does not know before it enrolls, leaving no agent behind", {
  timeout: 60_000,
}, async () => {
  const { code, stderr } = await refusedRun({ GANTRY_MODELS: "nosuch" });
  expect(code, stderr).toBe(2);
  expect(stderr).toContain("unknown model(s): nosuch");
  expect(await gw.gateway.stores.agents.list({ limit: 10 })).toEqual([]);
});
