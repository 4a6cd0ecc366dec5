import { createHash } from "node:crypto";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AgentHandle, startAgent } from "../../gpu-agent/agent.ts";
import { parseAgentConfig } from "../../gpu-agent/config.ts";
import type { NvidiaSmi } from "../../gpu-agent/devices/nvidia-smi.ts";
import { planRunners } from "../../gpu-agent/devices/runner-plan.ts";
import { runDoctor } from "../../gpu-agent/doctor/index.ts";
import { createAgentMetrics } from "../../gpu-agent/metrics.ts";
import { UserError } from "../../shared/errors.ts";
import { affineModel, modelFolder } from "../helpers/onnx-models.ts";
import { type RecordingRunners, recordingRunners } from "../helpers/recording-runner.ts";
import { installStubNvidiaSmi } from "../helpers/stub-nvidia-smi.ts";
import { startTestGateway, type TestGateway } from "../helpers/test-gateway.ts";

/**
 * A four-GPU host, here: a stub nvidia-smi on PATH lists four GPUs, and runners that run the
 * real pipelines in-process record which device each opened its sessions on. Three small
 * models (100 MiB each, as models.yaml declares) share budgets of 250 MiB per GPU, so each
 * runner holds two at most and swaps.
 */
const MODELS = ["a", "b", "c"];
const folder = modelFolder();
let smi: ReturnType<typeof installStubNvidiaSmi>;
let modelsFile: string;

beforeAll(() => {
  smi = installStubNvidiaSmi();
  const bytes = affineModel();
  const file = folder.write("affine.onnx", bytes);
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  const entries = MODELS.map(
    (id) =>
      `  - id: ${id}\n    task: tensor\n    memory_mb: 100\n    files:\n      - { name: model, url: ${file}, sha256: ${sha256} }\n`,
  ).join("");
  modelsFile = folder.write("models.yaml", new TextEncoder().encode(`models:\n${entries}`));
});
afterAll(() => {
  smi?.restore();
  folder.cleanup();
});

const plan = (env: Record<string, string> = {}, processEnv: NodeJS.ProcessEnv = {}) =>
  planRunners(
    parseAgentConfig({ GANTRY_GATEWAY_URL: "http://127.0.0.1:1", GANTRY_AGENT_TOKEN: "t", ...env }),
    { env: processEnv },
  );

describe("GPU discovery", () => {
  it("puts one runner on each of four GPUs, each on its own CUDA device", async () => {
    const placed = await plan();
    expect(placed.gpus.map((gpu) => gpu.info.index)).toEqual([0, 1, 2, 3]);
    expect(placed.runners.map((runner) => runner.gpu)).toEqual([
      { index: 0, cudaDeviceId: 0 },
      { index: 1, cudaDeviceId: 1 },
      { index: 2, cudaDeviceId: 2 },
      { index: 3, cudaDeviceId: 3 },
    ]);
    // Free memory less 10% (the stub's GPU 0: 23034 - 300 MiB free).
    expect(placed.budgets.get(0)).toBe(Math.floor(22734 - 2273.4));
    expect(placed.gpus[3]?.info).toMatchObject({ utilization: 30, temperature: 43 });
  });

  it("honours CUDA_VISIBLE_DEVICES (CUDA renumbers from 0), GANTRY_GPUS and slots per GPU", async () => {
    const visible = await plan({}, { CUDA_VISIBLE_DEVICES: "2,3" });
    expect(visible.runners.map((runner) => runner.gpu)).toEqual([
      { index: 2, cudaDeviceId: 0 },
      { index: 3, cudaDeviceId: 1 },
    ]);
    const byUuid = await plan({}, { CUDA_VISIBLE_DEVICES: "GPU-00000001" });
    expect(byUuid.runners.map((runner) => runner.gpu)).toEqual([{ index: 1, cudaDeviceId: 0 }]);
    const chosen = await plan({ GANTRY_GPUS: "0,2", GANTRY_SLOTS_PER_GPU: "2" });
    expect(chosen.runners.map((runner) => runner.gpu?.index)).toEqual([0, 0, 2, 2]);
    // Two runners share a GPU's budget.
    expect(chosen.runners[0]?.memoryBudgetMb).toBe(Math.floor(chosen.budgets.get(0)! / 2));
    // GANTRY_SLOTS spread over the GPUs: as many runners as slots, at least one a GPU.
    const six = await plan({ GANTRY_SLOTS: "6" });
    expect(six.runners.map((runner) => runner.gpu?.index)).toEqual([0, 0, 1, 1, 2, 3]);
    const two = await plan({ GANTRY_SLOTS: "2" });
    expect(two.runners.map((runner) => runner.gpu?.index)).toEqual([0, 1, 2, 3]);
    await expect(plan({ GANTRY_GPUS: "7" })).rejects.toThrow(/GANTRY_GPUS names GPU 7/);
    const cpu = await plan({ GANTRY_EXECUTION_PROVIDERS: "cpu", GANTRY_SLOTS: "3" });
    expect(cpu.runners.map((runner) => runner.gpu)).toEqual([undefined, undefined, undefined]);
  });

  it("stops at once when cuda is the only provider and its library is missing", async () => {
    // Before, each runner was forked again and again for ever, failing on the library.
    const missing = "/nonexistent/libonnxruntime_providers_cuda.so";
    const cudaOnly = (path: string) =>
      planRunners(
        parseAgentConfig({
          GANTRY_GATEWAY_URL: "http://127.0.0.1:1",
          GANTRY_AGENT_TOKEN: "t",
          GANTRY_EXECUTION_PROVIDERS: "cuda",
        }),
        { env: {}, cudaLibraryPath: path },
      );
    await expect(cudaOnly(missing)).rejects.toThrow(
      new UserError(
        `GANTRY_EXECUTION_PROVIDERS is cuda, but onnxruntime's CUDA provider library is missing (${missing}): fetch it with \`ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install\` (needs CUDA 12 and cuDNN 9), or add cpu to run on the CPU`,
      ),
    );
    const present = folder.write("libonnxruntime_providers_cuda.so", new Uint8Array());
    expect((await cudaOnly(present)).gpus).toHaveLength(4);
  });
});

describe("gantry-agent doctor on a four-GPU host", () => {
  it("shows a row per GPU, with the ones the agent would not use skipped", async () => {
    const report = await runDoctor(
      {
        gatewayUrl: null,
        queueUrl: null,
        models: [],
        providers: ["cuda", "cpu"],
        threads: 1,
        gpus: [1, 3],
        cudaVisibleDevices: "3,1,2",
      },
      { cudaLibraryPath: "/nonexistent/libonnxruntime_providers_cuda.so" },
    );
    const rows = report.results.filter((row) => row.name.startsWith("GPU "));
    expect(rows.map((row) => [row.name, row.status])).toEqual([
      ["GPU 0", "skip"],
      ["GPU 1", "pass"],
      ["GPU 2", "skip"],
      ["GPU 3", "pass"],
    ]);
    expect(rows[0]?.detail).toBe("NVIDIA L4: hidden by CUDA_VISIBLE_DEVICES");
    expect(rows[2]?.detail).toBe("NVIDIA L4: not in GANTRY_GPUS");
    expect(rows[1]?.detail).toBe(
      "NVIDIA L4: 22.1 GiB free of 22.5 GiB, 10% busy, 41 °C, CUDA device 1",
    );
    expect(rows[3]?.detail).toMatch(/CUDA device 0$/);
    expect(report.results.find((row) => row.name === "GANTRY_GPUS")).toMatchObject({
      status: "pass",
      detail: "runners on GPU 3, 1", // in CUDA_VISIBLE_DEVICES order, as CUDA numbers them
    });
  });

  it("fails GANTRY_GPUS where `run` would refuse it: a GPU it cannot see, or no nvidia-smi", async () => {
    // Before, the doctor called such a host ready and `run` then stopped at start.
    const doctor = (gpus: number[], nvidiaSmi?: NvidiaSmi) =>
      runDoctor(
        {
          gatewayUrl: null,
          queueUrl: null,
          models: [],
          providers: ["cuda", "cpu"],
          threads: 1,
          gpus,
        },
        { cudaLibraryPath: "/nonexistent/lib.so", ...(nvidiaSmi ? { nvidiaSmi } : {}) },
      );
    const row = (report: { results: { name: string }[] }) =>
      report.results.find((result) => result.name === "GANTRY_GPUS");
    const unseen = await doctor([7]);
    expect(unseen.ok).toBe(false);
    expect(row(unseen)).toMatchObject({ status: "fail", detail: expect.stringMatching(/GPU 7/) });
    const absent = Object.assign(new Error("spawn nvidia-smi ENOENT"), { code: "ENOENT" });
    const cpuHost = await doctor([0], () => Promise.reject(absent));
    expect(cpuHost.ok).toBe(false);
    expect(row(cpuHost)).toMatchObject({
      status: "fail",
      detail: "GANTRY_GPUS names GPUs, but they cannot be listed: no nvidia-smi on this host",
    });
  });
});

interface Job {
  id: string;
  status: string;
  model: string;
  output?: { outputs: { y: { data: number[] } } };
}

async function startFourGpuAgent(
  gw: TestGateway,
  runners: RecordingRunners,
  env: Record<string, string> = {},
) {
  const config = parseAgentConfig({
    ...env,
    GANTRY_GATEWAY_URL: gw.url,
    GANTRY_AGENT_TOKEN: gw.agentToken,
    GANTRY_QUEUE_URL: "embedded",
    GANTRY_MODELS: MODELS.join(","),
    GANTRY_MODELS_FILE: modelsFile,
    GANTRY_MODEL_CACHE_DIR: join(gw.dataDir, "model-cache"),
    GANTRY_MODEL_MEMORY_MB: "250",
    GANTRY_HEARTBEAT_INTERVAL_SECONDS: "0.2",
    GANTRY_LEASE_SECONDS: "5",
    GANTRY_DRAIN_TIMEOUT_SECONDS: "5",
    GANTRY_MAX_ATTEMPTS: "3",
  });
  return startAgent(config, {
    logger: pino({ level: process.env.GANTRY_TEST_LOG ?? "silent" }),
    createRunner: runners.create,
    openQueue: async () => ({ queue: gw.queue, description: "test", close: async () => {} }),
  });
}

/** Submits `count` jobs at once, cycling over the models; x = [n, n, n, n]. */
function submitJobs(gw: TestGateway, count: number): Promise<string[]> {
  const submit = async (n: number) => {
    const model = MODELS[n % MODELS.length]!;
    const input = {
      inputs: {
        x: { dims: [1, 4], type: "float32", data: [n, n, n, n] },
        k: { dims: [1, 1], type: "int64", data: [n] },
      },
    };
    const response = await gw.api("/v1/jobs", { method: "POST", json: { model, input } });
    expect(response.status).toBe(202);
    return ((await response.json()) as { id: string }).id;
  };
  return Promise.all(Array.from({ length: count }, (_, n) => submit(n)));
}

async function finished(gw: TestGateway, ids: string[]): Promise<Job[]> {
  for (;;) {
    const jobs = await Promise.all(
      ids.map(async (id) => (await (await gw.api(`/v1/jobs/${id}`)).json()) as Job),
    );
    if (jobs.every((job) => job.status === "succeeded" || job.status === "failed")) return jobs;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface AgentListing {
  data: {
    id: string;
    vram_total_mb: number | null;
    vram_used_mb: number | null;
    loaded_models: string[];
    devices: {
      index: number;
      name: string;
      vram_total_mb: number;
      vram_used_mb: number;
      utilization: number | null;
      models: string[];
      failed?: boolean;
    }[];
  }[];
}

/** The agent as `GET /v1/admin/agents` shows it, once a heartbeat has described its GPUs. */
async function listed(gw: TestGateway, agent: AgentHandle) {
  for (;;) {
    const response = await gw.api("/v1/admin/agents");
    expect(response.status).toBe(200);
    const body = (await response.json()) as AgentListing;
    const view = body.data.find((entry) => entry.id === agent.agentId);
    if (view && view.devices.length > 0) return view;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Replays the load/unload events: the most models each runner ever held at once. */
function mostHeld(events: readonly string[]): Map<number, number> {
  const held = new Map<number, Set<string>>();
  const most = new Map<number, number>();
  for (const event of events) {
    const [, index, what, model] = event.split(" ");
    const set = held.get(Number(index)) ?? new Set<string>();
    held.set(Number(index), set);
    if (what === "load") set.add(model!);
    if (what === "unload") set.delete(model!);
    if (what === "crashed") set.clear();
    most.set(Number(index), Math.max(most.get(Number(index)) ?? 0, set.size));
  }
  return most;
}

describe("an agent on a four-GPU host", () => {
  let gw: TestGateway;
  let agent: AgentHandle | null = null;
  const config = { modelTasks: { a: "tensor", b: "tensor", c: "tensor" } } as const;

  beforeAll(async () => {
    gw = await startTestGateway({ models: MODELS, config });
  });
  afterAll(async () => {
    await agent?.stop();
    await gw?.close();
  });

  it("runs a runner per GPU, each opening its sessions on its own device, swapping models within budget", async () => {
    const runners = recordingRunners();
    agent = await startFourGpuAgent(gw, runners);
    expect(runners.runners.map((runner) => runner.gpu)).toEqual([0, 1, 2, 3]);
    const jobs = await finished(gw, await submitJobs(gw, 30));
    jobs.forEach((job, n) => {
      expect(job.status).toBe("succeeded");
      expect(job.output?.outputs.y.data).toEqual([2 * n + 1, 2 * n + 1, 2 * n + 1, 2 * n + 1]);
    });
    // Every session each runner opened was on its own GPU's device, through CUDA.
    expect(runners.opened.length).toBeGreaterThanOrEqual(8);
    for (const session of runners.opened) {
      expect(session).toMatchObject({ provider: "cuda", deviceId: session.runner });
    }
    expect(new Set(runners.opened.map((s) => s.deviceId))).toEqual(new Set([0, 1, 2, 3]));
    // Each started with the two models that fit (a, b) and never held three at once.
    for (const most of mostHeld(runners.events).values()) expect(most).toBe(2);
    expect(runners.events.some((event) => event.includes("unload"))).toBe(true);
    const status = agent.supervisor.status();
    expect(status.runners.map((runner) => runner.gpu)).toEqual([0, 1, 2, 3]);
    expect(status.failedGpus).toEqual([]);
    // Each GPU in the admin listing, with the stub's readings and the models it holds.
    const view = await listed(gw, agent);
    expect(view.devices.map((device) => device.index)).toEqual([0, 1, 2, 3]);
    expect(view.devices[1]).toMatchObject({
      name: "NVIDIA L4",
      vram_total_mb: 23034,
      vram_used_mb: 400,
      utilization: 10,
    });
    for (const device of view.devices) {
      expect(device.models.length).toBeGreaterThanOrEqual(1);
      expect(device.models.length).toBeLessThanOrEqual(2);
      expect(device.failed).toBeUndefined();
    }
    expect(view.loaded_models.length).toBeGreaterThanOrEqual(2);
    // And in the agent's /metrics, GPU by GPU.
    const metrics = createAgentMetrics({ supervisor: agent.supervisor, runners: agent.runners });
    const text = await metrics.registry.metrics();
    metrics.close();
    expect(text).toContain(
      'gantry_agent_gpu_memory_used_bytes{gpu="3",name="NVIDIA L4"} 629145600',
    );
    expect(text).toContain('gantry_agent_gpu_utilization_ratio{gpu="2",name="NVIDIA L4"} 0.2');
    expect(text).toContain('gantry_agent_gpu_temperature_celsius{gpu="1",name="NVIDIA L4"} 41');
    expect(text).toContain('gantry_agent_gpu_failed{gpu="0"} 0');
    expect(text).toMatch(/gantry_agent_model_loaded\{runner="0",gpu="0",model="[abc]"\} 1/);
    await agent.stop();
    agent = null;
  });

  it("counts the VRAM of its own GPUs only, as its devices do (GANTRY_GPUS=0,2)", async () => {
    // Registered as nvidia-smi's total over every GPU of the host while its heartbeats count
    // its own GPUs' use: an agent on half a box could never read as overloaded (or, where
    // nvidia-smi's memory query failed, the listing showed "800/? MiB").
    agent = await startFourGpuAgent(gw, recordingRunners(), { GANTRY_GPUS: "0,2" });
    const view = await listed(gw, agent);
    expect(view.devices.map((device) => device.index)).toEqual([0, 2]);
    expect(view.vram_used_mb).toBe(300 + 500);
    expect(view.vram_total_mb).toBe(2 * 23034);
    await agent.stop();
    agent = null;
  });

  it("takes a failing GPU out alone; its jobs run on the other three", async () => {
    const runners = recordingRunners({ failingDevice: 2 });
    const started = await startFourGpuAgent(gw, runners);
    agent = started;
    // Which GPU a job lands on depends on what is loaded where and on timing: rounds of 30
    // until the failing GPU has had its three runs (the first round, nearly always).
    const jobs: Job[] = [];
    const failed = () => started.supervisor.status().failedGpus ?? [];
    for (let round = 0; round < 5 && failed().length === 0; round++) {
      jobs.push(...(await finished(gw, await submitJobs(gw, 30))));
    }
    for (const job of jobs) expect(job.status).toBe("succeeded");
    expect(agent.supervisor.status().failedGpus).toEqual([2]);
    expect(runners.runners[2]!.restarts).toBe(3);
    for (const index of [0, 1, 3]) expect(runners.runners[index]!.restarts).toBe(0);
    const view = await listed(gw, agent);
    expect(view.devices.filter((device) => device.failed).map((device) => device.index)).toEqual([
      2,
    ]);
    await agent.stop();
    agent = null;
  });
});
