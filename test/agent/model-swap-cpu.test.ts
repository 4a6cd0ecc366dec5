import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import { BUILTIN_REGISTRY_PATH } from "../../gpu-agent/registry/index.ts";
import { productPhoto } from "../helpers/product-photo.ts";
import { renderTextPng } from "../helpers/render-text.ts";
import { followJob } from "../helpers/sse.ts";
import { startTestGateway, type TestGateway, uploadFile } from "../helpers/test-gateway.ts";

/**
 * The real CPU path of on-demand loading: one runner child serving OCR (PP-OCRv4) and rmbg
 * (ISNet) with a memory budget that holds only one of them (models.yaml declares 200 and
 * 400 MiB; the budget is 500), so an alternating stream swaps them on every job, and every
 * job still comes out right.
 */
let gw: TestGateway;
let agent: AgentHandle;
const loadWaits: number[] = [];

beforeAll(async () => {
  gw = await startTestGateway({
    models: ["ocr", "rmbg"],
    config: { modelTasks: { rmbg: "background-removal" } },
  });
  // Gantry's own rmbg entry, with the size it is planned by; ocr needs no file.
  const builtin = parse(readFileSync(BUILTIN_REGISTRY_PATH, "utf8")) as {
    models: Record<string, unknown>[];
  };
  const rmbg = { ...builtin.models.find((entry) => entry.id === "rmbg"), memory_mb: 400 };
  const modelsFile = join(gw.dataDir, "models.yaml");
  writeFileSync(
    modelsFile,
    stringify({ models: [{ id: "ocr", task: "ocr", memory_mb: 200 }, rmbg] }),
  );
  const config = parseAgentConfig({
    GANTRY_GATEWAY_URL: gw.url,
    GANTRY_AGENT_TOKEN: gw.agentToken,
    GANTRY_QUEUE_URL: "embedded",
    GANTRY_MODELS: "ocr,rmbg",
    GANTRY_MODELS_FILE: modelsFile,
    GANTRY_MODEL_CACHE_DIR: join(gw.dataDir, "model-cache"),
    GANTRY_MODEL_MEMORY_MB: "500",
    GANTRY_EXECUTION_PROVIDERS: "cpu",
    GANTRY_THREADS: "2",
    GANTRY_HEARTBEAT_INTERVAL_SECONDS: "1",
    GANTRY_LEASE_SECONDS: "30",
    GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
  });
  agent = await startAgent(config, {
    logger: pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
    openQueue: async () => ({ queue: gw.queue, description: "test", close: async () => {} }),
  });
  agent.supervisor.on((event) => {
    if (event.type === "running") loadWaits.push(event.loadMs ?? -1);
  });
});
afterAll(async () => {
  await agent?.stop();
  await gw?.close();
});

async function run(model: string, image: string) {
  const submitted = await gw.api("/v1/jobs", { method: "POST", json: { model, input: { image } } });
  expect(submitted.status).toBe(202);
  const { id } = (await submitted.json()) as { id: string };
  await followJob((path) => gw.api(path), id);
  return (await (await gw.api(`/v1/jobs/${id}`)).json()) as {
    status: string;
    output: Record<string, unknown>;
    metrics: { load_ms?: number };
  };
}

describe("one runner, two models, room for one", () => {
  it("serves an alternating stream of OCR and rmbg right, swapping them", async () => {
    const text = await uploadFile(gw, await renderTextPng(["Invoice 4721"]), "image/png");
    const photo = await productPhoto();
    const picture = await uploadFile(gw, photo.png, "image/png");
    const truthCoverage = photo.truth.filter((v) => v >= 128).length / photo.truth.length;
    // Started with what fits: OCR, the first model named.
    expect(agent.supervisor.status().runners[0]?.models).toEqual(["ocr"]);
    const jobLoads: (number | undefined)[] = [];
    for (const round of [1, 2]) {
      const ocr = await run("ocr", text);
      jobLoads.push(ocr.metrics.load_ms);
      expect(ocr.status).toBe("succeeded");
      expect(String(ocr.output.text).toLowerCase()).toContain("invoice");
      expect(agent.supervisor.status().runners[0]?.models).toEqual(["ocr"]);
      const cut = await run("rmbg", picture);
      expect(cut.status, `round ${round}`).toBe("succeeded");
      jobLoads.push(cut.metrics.load_ms);
      expect(Math.abs((cut.output.coverage as number) - truthCoverage)).toBeLessThan(0.01);
      expect(agent.supervisor.status().runners[0]?.models).toEqual(["rmbg"]);
    }
    // The first OCR job found its model loaded; every job after it waited for a load.
    expect(loadWaits[0]).toBe(0);
    expect(loadWaits.slice(1).every((ms) => ms > 0)).toBe(true);
    // Each job shows its wait as `metrics.load_ms` (absent: warm), as the agent measured it.
    expect(jobLoads[0]).toBeUndefined();
    expect(jobLoads.slice(1)).toEqual(loadWaits.slice(1).map((ms) => Math.round(ms)));
    expect(agent.supervisor.status().runners[0]?.restarts).toBe(0);
    // Three loads of ISNet or OCR and two ISNet runs on two shared cores: minutes, not seconds.
  }, 300_000);
});
