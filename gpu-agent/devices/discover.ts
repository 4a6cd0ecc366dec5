import { UserError } from "../../shared/errors.ts";
import type { ExecutionProvider } from "../inference/types.ts";
import { type GpuInfo, type NvidiaSmi, queryGpus } from "./nvidia-smi.ts";

/** A GPU this agent runs on: what nvidia-smi says of it, and its ordinal for CUDA. */
export interface AgentGpu {
  info: GpuInfo;
  /**
   * The `deviceId` CUDA knows it by in this process: its place in CUDA_VISIBLE_DEVICES when
   * that is set (CUDA renumbers the visible GPUs from 0), else nvidia-smi's index.
   */
  cudaDeviceId: number;
}

/** One runner to start: on a GPU, or (null) on the host, as before GPUs were counted. */
export interface RunnerSlot {
  gpu: AgentGpu | null;
}

export interface DiscoverOptions {
  providers: readonly ExecutionProvider[];
  /** GANTRY_GPUS: nvidia-smi indices to use; absent: every visible GPU. */
  chosen?: readonly number[] | undefined;
  /** The process's CUDA_VISIBLE_DEVICES, as CUDA reads it. */
  cudaVisibleDevices?: string | undefined;
  nvidiaSmi?: NvidiaSmi;
}

/**
 * The GPUs this agent spreads its runners over: those nvidia-smi lists, narrowed to the ones
 * CUDA_VISIBLE_DEVICES shows (by index or UUID, in its order), then to GANTRY_GPUS. None
 * when cuda is not among the providers or there is no working nvidia-smi: the runners then
 * start as on a CPU host (cuda still tried first when configured, as before).
 */
export async function discoverGpus(options: DiscoverOptions): Promise<AgentGpu[]> {
  if (!options.providers.includes("cuda")) return [];
  const found = await queryGpus(options.nvidiaSmi);
  if (!("gpus" in found)) {
    if (options.chosen?.length) {
      const why = "missing" in found ? "no nvidia-smi on this host" : found.error;
      throw new UserError(`GANTRY_GPUS names GPUs, but they cannot be listed: ${why}`);
    }
    return [];
  }
  const visible = visibleGpus(found.gpus, options.cudaVisibleDevices);
  if (!options.chosen?.length) return visible;
  const missing = options.chosen.filter(
    (index) => !visible.some((gpu) => gpu.info.index === index),
  );
  if (missing.length > 0) {
    const seen = visible.map((gpu) => gpu.info.index).join(", ") || "none";
    throw new UserError(
      `GANTRY_GPUS names GPU ${missing.join(", ")}, which this process cannot see (visible: ${seen})`,
    );
  }
  return visible.filter((gpu) => options.chosen!.includes(gpu.info.index));
}

/** The GPUs CUDA will show this process, each with the ordinal CUDA gives it. */
export function visibleGpus(gpus: readonly GpuInfo[], cudaVisibleDevices?: string): AgentGpu[] {
  if (cudaVisibleDevices === undefined) {
    return gpus.map((info) => ({ info, cudaDeviceId: info.index }));
  }
  const visible: AgentGpu[] = [];
  for (const entry of cudaVisibleDevices.split(",").map((part) => part.trim())) {
    if (entry === "") continue;
    const info = /^\d+$/.test(entry)
      ? gpus.find((gpu) => gpu.index === Number(entry))
      : gpus.find((gpu) => gpu.uuid?.startsWith(entry));
    // CUDA stops at the first entry it cannot match: the ones after it are not visible.
    if (!info) break;
    visible.push({ info, cudaDeviceId: visible.length });
  }
  return visible;
}

/**
 * One runner per slot: `slotsPerGpu` on each GPU, or by default GANTRY_SLOTS spread over
 * them (6 over 4 GPUs: 2, 2, 1, 1; at least one each, so every GPU serves), or GANTRY_SLOTS
 * runners on a host without GPUs. Rounded up per GPU, 6 slots had made 8 runners: more
 * jobs at once, and more memory, than the operator asked for.
 */
export function planSlots(
  gpus: readonly AgentGpu[],
  options: { slots: number; slotsPerGpu?: number | undefined },
): RunnerSlot[] {
  if (gpus.length === 0) return Array.from({ length: options.slots }, () => ({ gpu: null }));
  const base = Math.floor(options.slots / gpus.length);
  const extra = options.slots % gpus.length;
  return gpus.flatMap((gpu, n) => {
    const count = options.slotsPerGpu ?? Math.max(1, base + (n < extra ? 1 : 0));
    return Array.from({ length: count }, () => ({ gpu }));
  });
}
