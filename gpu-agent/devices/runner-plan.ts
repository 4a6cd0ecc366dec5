import { freemem } from "node:os";
import { UserError } from "../../shared/errors.ts";
import type { AgentConfig } from "../config.ts";
import type { PoolOptions } from "../runner/pool.ts";
import type { RunnerOptions } from "../runner/types.ts";
import { CUDA_LIBRARY_INSTALL, cudaLibraryPath, cudaLibraryPresent } from "./cuda-library.ts";
import { type AgentGpu, discoverGpus, planSlots } from "./discover.ts";
import type { NvidiaSmi } from "./nvidia-smi.ts";

type PlanConfig = Pick<
  AgentConfig,
  "executionProviders" | "gpus" | "slots" | "slotsPerGpu" | "models" | "preload" | "modelMemoryMb"
>;

/** Where each runner goes and what it may hold: the agent's runners, GPU by GPU. */
export interface RunnerPlan {
  gpus: AgentGpu[];
  /** Per runner: what to add to its options (its GPU, budget, start-up models). */
  runners: Pick<RunnerOptions, "gpu" | "memoryBudgetMb" | "preload" | "pinPreload">[];
  /** The pool's budgets and pinned models. */
  pool: PoolOptions;
  /** Each device's budget (MiB), by nvidia-smi index, or `host` without GPUs. */
  budgets: Map<number | "host", number>;
}

/** Kept free beside the models: the CUDA context, activations, other processes. */
export function defaultBudgetMb(freeMb: number): number {
  return Math.max(0, Math.floor(freeMb - Math.max(512, freeMb * 0.1)));
}

/**
 * Finds the GPUs (nvidia-smi, CUDA_VISIBLE_DEVICES, GANTRY_GPUS), places GANTRY_SLOTS_PER_GPU
 * runners on each, and splits each device's memory budget (GANTRY_MODEL_MEMORY_MB, else its
 * free memory now less a margin; host memory without GPUs) equally among its runners.
 */
export async function planRunners(
  config: PlanConfig,
  deps: { nvidiaSmi?: NvidiaSmi; env?: NodeJS.ProcessEnv; cudaLibraryPath?: string } = {},
): Promise<RunnerPlan> {
  const env = deps.env ?? process.env;
  // With cuda alone, no runner could ever start: each would fail on the missing library
  // again and again. (A driver or GPU that is not there yet may come; the library will not.)
  const library = deps.cudaLibraryPath ?? cudaLibraryPath();
  if (!config.executionProviders.includes("cpu") && !(await cudaLibraryPresent(library))) {
    throw new UserError(
      `GANTRY_EXECUTION_PROVIDERS is ${config.executionProviders.join(",")}, but onnxruntime's CUDA provider library is missing (${library}): fetch it with ${CUDA_LIBRARY_INSTALL}, or add cpu to run on the CPU`,
    );
  }
  const gpus = await discoverGpus({
    providers: config.executionProviders,
    chosen: config.gpus,
    cudaVisibleDevices: env.CUDA_VISIBLE_DEVICES,
    ...(deps.nvidiaSmi ? { nvidiaSmi: deps.nvidiaSmi } : {}),
  });
  const slots = planSlots(gpus, config);
  const budgets = new Map<number | "host", number>();
  for (const gpu of gpus) {
    budgets.set(gpu.info.index, config.modelMemoryMb ?? defaultBudgetMb(gpu.info.memoryFreeMiB));
  }
  if (gpus.length === 0) {
    budgets.set("host", config.modelMemoryMb ?? defaultBudgetMb(freemem() / 2 ** 20));
  }
  const keyOf = (gpu: AgentGpu | null) => gpu?.info.index ?? "host";
  const sharing = (key: number | "host") => slots.filter((slot) => keyOf(slot.gpu) === key).length;
  const runners = slots.map(({ gpu }) => {
    const key = keyOf(gpu);
    return {
      ...(gpu ? { gpu: { index: gpu.info.index, cudaDeviceId: gpu.cudaDeviceId } } : {}),
      memoryBudgetMb: Math.floor(budgets.get(key)! / sharing(key)),
      preload: config.preload ?? config.models,
      ...(config.preload ? { pinPreload: true } : {}),
    };
  });
  return {
    gpus,
    runners,
    budgets,
    pool: {
      budgetMb: (index) => runners[index]?.memoryBudgetMb,
      ...(config.preload ? { pinned: config.preload } : {}),
    },
  };
}
