import { CUDA_LIBRARY_INSTALL, cudaLibraryPresent } from "../devices/cuda-library.ts";
import { discoverGpus, visibleGpus } from "../devices/discover.ts";
import type { GpuQueryResult, NvidiaSmi } from "../devices/nvidia-smi.ts";
import type { ExecutionProvider } from "../inference/types.ts";
import { type CheckResult, type CheckStatus, errorText } from "./report.ts";

export { cudaLibraryPath } from "../devices/cuda-library.ts";
export { type GpuInfo, type NvidiaSmi, queryGpus, runNvidiaSmi } from "../devices/nvidia-smi.ts";

/**
 * How bad a missing CUDA piece is: with `cpu` in the providers the agent still runs (more
 * slowly), so a warning; with only `cuda`, the agent cannot start, so a failure.
 */
export function cudaSeverity(providers: readonly ExecutionProvider[]): CheckStatus {
  return providers.includes("cpu") ? "warn" : "fail";
}

export function driverCheck(
  gpus: GpuQueryResult,
  providers: readonly ExecutionProvider[],
): CheckResult {
  const name = "NVIDIA driver";
  const severity = cudaSeverity(providers);
  const fallback =
    severity === "warn" ? "so the CPU path will be used" : "and only cuda is configured";
  if ("missing" in gpus) {
    return {
      name,
      status: severity,
      detail: `no GPU: no NVIDIA driver found, ${fallback}`,
      hint: "install the NVIDIA driver so that `nvidia-smi` works, or set GANTRY_EXECUTION_PROVIDERS=cpu",
    };
  }
  if ("error" in gpus) {
    return {
      name,
      status: severity,
      detail: `nvidia-smi failed (${gpus.error}): ${fallback}`,
      hint: "check the driver with `nvidia-smi`; a driver/library version mismatch needs a reboot",
    };
  }
  if (gpus.gpus.length === 0) {
    return { name, status: severity, detail: `nvidia-smi lists no GPU: ${fallback}` };
  }
  const names = [...new Set(gpus.gpus.map((gpu) => gpu.name))].join(", ");
  return {
    name,
    status: "pass",
    detail: `${gpus.gpus.length}× ${names} (driver ${gpus.gpus[0]?.driver})`,
  };
}

/** Below this a model's weights and activations rarely fit: warn before a job finds out. */
const LOW_VRAM_MIB = 1024;

export function vramCheck(gpus: GpuQueryResult): CheckResult {
  const name = "free VRAM";
  if (!("gpus" in gpus) || gpus.gpus.length === 0) {
    return { name, status: "skip", detail: "no GPU to measure" };
  }
  const gib = (mib: number) => `${(mib / 1024).toFixed(1)} GiB`;
  const low = gpus.gpus.filter((gpu) => gpu.memoryFreeMiB < LOW_VRAM_MIB);
  return {
    name,
    status: low.length > 0 ? "warn" : "pass",
    detail: gpus.gpus
      .map((gpu) => `GPU${gpu.index} ${gib(gpu.memoryFreeMiB)} free of ${gib(gpu.memoryTotalMiB)}`)
      .join("; "),
    ...(low.length > 0
      ? { hint: "another process holds the GPU memory; see `nvidia-smi` for which" }
      : {}),
  };
}

/**
 * A row per GPU: its name, free memory, utilisation and temperature, and the CUDA device id
 * its runner would open sessions on; one this agent would not use (hidden by
 * CUDA_VISIBLE_DEVICES or left out of GANTRY_GPUS) is skipped, saying why.
 */
export function gpuRows(
  gpus: GpuQueryResult,
  options: { cudaVisibleDevices?: string | undefined; chosen?: readonly number[] | undefined },
): CheckResult[] {
  if (!("gpus" in gpus)) return [];
  const visible = visibleGpus(gpus.gpus, options.cudaVisibleDevices);
  const gib = (mib: number) => `${(mib / 1024).toFixed(1)} GiB`;
  return gpus.gpus.map((gpu) => {
    const name = `GPU ${gpu.index}`;
    const seen = visible.find((entry) => entry.info.index === gpu.index);
    if (!seen) {
      return { name, status: "skip", detail: `${gpu.name}: hidden by CUDA_VISIBLE_DEVICES` };
    }
    if (options.chosen && !options.chosen.includes(gpu.index)) {
      return { name, status: "skip", detail: `${gpu.name}: not in GANTRY_GPUS` };
    }
    const readings = [
      `${gib(gpu.memoryFreeMiB)} free of ${gib(gpu.memoryTotalMiB)}`,
      ...(gpu.utilization === null ? [] : [`${gpu.utilization}% busy`]),
      ...(gpu.temperature === null ? [] : [`${gpu.temperature} °C`]),
      `CUDA device ${seen.cudaDeviceId}`,
    ];
    const low = gpu.memoryFreeMiB < LOW_VRAM_MIB;
    return {
      name,
      status: low ? "warn" : "pass",
      detail: `${gpu.name}: ${readings.join(", ")}`,
      ...(low ? { hint: "another process holds this GPU's memory; see `nvidia-smi`" } : {}),
    };
  });
}

export async function cudaLibraryCheck(
  path: string,
  providers: readonly ExecutionProvider[],
): Promise<CheckResult> {
  const name = "CUDA provider libraries";
  if (await cudaLibraryPresent(path)) return { name, status: "pass", detail: path };
  return {
    name,
    status: cudaSeverity(providers),
    detail: `missing: ${path}`,
    hint: `fetch them with ${CUDA_LIBRARY_INSTALL}`,
  };
}

/** Whether onnxruntime can create and run a session on `provider`. */
export async function providerCheck(
  provider: ExecutionProvider,
  providers: readonly ExecutionProvider[],
  probe: (provider: ExecutionProvider) => Promise<void>,
): Promise<CheckResult> {
  const name = `${provider} execution provider`;
  try {
    await probe(provider);
    return { name, status: "pass", detail: "creates and runs a session" };
  } catch (error) {
    return {
      name,
      status: provider === "cuda" ? cudaSeverity(providers) : "fail",
      detail: `does not work: ${errorText(error)}`,
    };
  }
}

/**
 * GANTRY_GPUS as `gantry-agent run` reads it (the same discovery): a GPU it names that
 * nvidia-smi cannot list, or that CUDA_VISIBLE_DEVICES hides, stops `run` at start, so the
 * doctor fails it rather than call the host ready.
 */
export async function gpuSelectionCheck(
  options: {
    providers: readonly ExecutionProvider[];
    gpus: readonly number[];
    cudaVisibleDevices?: string | undefined;
  },
  nvidiaSmi?: NvidiaSmi,
): Promise<CheckResult> {
  const name = "GANTRY_GPUS";
  try {
    const chosen = await discoverGpus({
      providers: options.providers,
      chosen: options.gpus,
      cudaVisibleDevices: options.cudaVisibleDevices,
      ...(nvidiaSmi ? { nvidiaSmi } : {}),
    });
    const indexes = chosen.map((gpu) => gpu.info.index).join(", ");
    return { name, status: "pass", detail: `runners on GPU ${indexes}` };
  } catch (error) {
    return {
      name,
      status: "fail",
      detail: errorText(error),
      hint: "name GPUs that nvidia-smi lists and CUDA_VISIBLE_DEVICES shows, or leave GANTRY_GPUS unset",
    };
  }
}
