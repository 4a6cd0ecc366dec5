import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { installStubNvidiaSmi } from "../helpers/stub-nvidia-smi.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * An agent whose GPU settings cannot work (GANTRY_GPUS naming a GPU the host lacks, cuda
 * alone without its library) stops at start, exit 2; but it enrolled first, so every such
 * start left an agent that "enrolled but never registered" in `gantry agents list`: a
 * crash-looping pod (the kubelet restarts it whatever its exit code) one more every restart.
 * The GPUs are now planned before the agent enrolls, and GANTRY_MODELS_FILE read.
 */
const BIN = join(import.meta.dirname, "../../bin/gantry-agent.js");
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
  const child = spawn(process.execPath, [BIN, "run"], {
    env: {
      PATH: process.env.PATH,
      GANTRY_GATEWAY_URL: gw.url,
      GANTRY_AGENT_TOKEN: gw.agentToken,
      GANTRY_MODELS: "noop",
      GANTRY_LOG_FORMAT: "json",
      ...settings,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const [code] = await once(child, "exit");
  return { code, stderr };
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
