import { Gauge, Histogram, type Registry } from "prom-client";
import { type GpuInfo, queryGpus } from "./devices/nvidia-smi.ts";
import type { Supervisor } from "./supervisor/types.ts";

/** The per-GPU and model-placement metrics' names (AGENT_METRIC_NAMES lists them too). */
export const GPU_METRIC_NAMES = [
  "gantry_agent_gpu_memory_used_bytes",
  "gantry_agent_gpu_memory_total_bytes",
  "gantry_agent_gpu_utilization_ratio",
  "gantry_agent_gpu_temperature_celsius",
  "gantry_agent_gpu_failed",
  "gantry_agent_model_loaded",
  "gantry_agent_model_load_seconds",
] as const;

const MIB = 1024 * 1024;
// A small ONNX model loads in tens of milliseconds; a large one on a cold disk, a minute.
const LOAD_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/**
 * Each GPU's memory, utilisation and temperature (nvidia-smi, read once per scrape, for the
 * agent's own GPUs), whether it was taken out, which models each runner holds, and how long
 * jobs waited for their model to load. Returns the unsubscribe from the supervisor.
 */
export function registerGpuMetrics(
  registry: Registry,
  supervisor: Pick<Supervisor, "on" | "status">,
  readGpus: () => Promise<GpuInfo[] | null> = async () => {
    const found = await queryGpus();
    return "gpus" in found ? found.gpus : null;
  },
): () => void {
  const registers = [registry];
  const labelNames = ["gpu", "name"] as const;
  // One nvidia-smi per scrape, shared by the four gauges that read it.
  let reading: { at: number; gpus: Promise<GpuInfo[]> } | null = null;
  const ours = async () => {
    const status = supervisor.status();
    const indices = new Set(status.runners.flatMap((r) => (r.gpu === undefined ? [] : [r.gpu])));
    if (indices.size === 0) return [];
    if (!reading || Date.now() - reading.at > 1_000) {
      reading = { at: Date.now(), gpus: readGpus().then((gpus) => gpus ?? []) };
    }
    return (await reading.gpus).filter((gpu) => indices.has(gpu.index));
  };
  const perGpu = (name: string, help: string, value: (gpu: GpuInfo) => number | null) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      async collect() {
        this.reset();
        for (const gpu of await ours()) {
          const v = value(gpu);
          if (v !== null) this.set({ gpu: String(gpu.index), name: gpu.name }, v);
        }
      },
    });
  perGpu(GPU_METRIC_NAMES[0], "GPU memory in use (all processes).", (g) => g.memoryUsedMiB * MIB);
  perGpu(GPU_METRIC_NAMES[1], "GPU memory in all.", (g) => g.memoryTotalMiB * MIB);
  perGpu(GPU_METRIC_NAMES[2], "GPU utilisation, 0 to 1.", (g) =>
    g.utilization === null ? null : g.utilization / 100,
  );
  perGpu(GPU_METRIC_NAMES[3], "GPU temperature.", (g) => g.temperature);
  new Gauge({
    name: GPU_METRIC_NAMES[4],
    help: "1 for a GPU taken out after its runners kept failing: it gets no more jobs.",
    labelNames: ["gpu"],
    registers,
    collect() {
      this.reset();
      const status = supervisor.status();
      const failed = new Set(status.failedGpus ?? []);
      for (const runner of status.runners) {
        if (runner.gpu !== undefined)
          this.set({ gpu: String(runner.gpu) }, failed.has(runner.gpu) ? 1 : 0);
      }
    },
  });
  new Gauge({
    name: GPU_METRIC_NAMES[5],
    help: "1 for each model loaded on a runner now, by runner and its GPU (empty on a CPU host).",
    labelNames: ["runner", "gpu", "model"],
    registers,
    collect() {
      this.reset();
      for (const runner of supervisor.status().runners) {
        for (const model of runner.models ?? []) {
          const gpu = runner.gpu === undefined ? "" : String(runner.gpu);
          this.set({ runner: String(runner.index), gpu, model }, 1);
        }
      }
    },
  });
  const loadWait = new Histogram({
    name: GPU_METRIC_NAMES[6],
    help: "How long a job waited for its model to load on its runner (jobs that found it loaded are not counted).",
    buckets: LOAD_BUCKETS,
    registers,
  });
  return supervisor.on((event) => {
    if (event.type === "running" && event.loadMs) loadWait.observe(event.loadMs / 1000);
  });
}
