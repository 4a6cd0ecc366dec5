import { execFile } from "node:child_process";
import { access } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { ExecutionProvider } from "../inference/types.ts";
import { type CheckResult, type CheckStatus, errorText } from "./report.ts";

/** One GPU as `nvidia-smi` reports it; memory in MiB. */
export interface GpuInfo {
  index: number;
  name: string;
  driver: string;
  memoryUsedMiB: number;
  memoryFreeMiB: number;
  memoryTotalMiB: number;
}

/** Runs `nvidia-smi` with these arguments: its stdout, or a rejection (ENOENT when absent). */
export type NvidiaSmi = (args: string[]) => Promise<string>;

export const runNvidiaSmi: NvidiaSmi = (args) =>
  new Promise((resolve, reject) => {
    // A wedged driver can make nvidia-smi hang for minutes; a doctor must answer.
    execFile("nvidia-smi", args, { timeout: 15_000 }, (error, stdout, stderr) => {
      if (error) reject(Object.assign(error, { stderr: String(stderr).trim() }));
      else resolve(String(stdout));
    });
  });

const QUERY = [
  "--query-gpu=index,name,driver_version,memory.used,memory.free,memory.total",
  "--format=csv,noheader,nounits",
];

/** The GPUs, an empty list when the driver is absent, or the driver's own error. */
export async function queryGpus(
  smi: NvidiaSmi,
): Promise<{ gpus: GpuInfo[] } | { missing: true } | { error: string }> {
  let output: string;
  try {
    output = await smi(QUERY);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { missing: true };
    const stderr = (error as { stderr?: string }).stderr;
    return { error: stderr || errorText(error) };
  }
  const gpus = output
    .split("\n")
    .map((line) => line.split(",").map((field) => field.trim()))
    .filter((fields) => fields.length >= 6)
    .map(([index, name, driver, used, free, total]) => ({
      index: Number(index),
      name: name ?? "?",
      driver: driver ?? "?",
      memoryUsedMiB: Number(used),
      memoryFreeMiB: Number(free),
      memoryTotalMiB: Number(total),
    }));
  return { gpus };
}

/**
 * How bad a missing CUDA piece is: with `cpu` in the providers the agent still runs (more
 * slowly), so a warning; with only `cuda`, the agent cannot start, so a failure.
 */
export function cudaSeverity(providers: readonly ExecutionProvider[]): CheckStatus {
  return providers.includes("cpu") ? "warn" : "fail";
}

export function driverCheck(
  gpus: Awaited<ReturnType<typeof queryGpus>>,
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

export function vramCheck(gpus: Awaited<ReturnType<typeof queryGpus>>): CheckResult {
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

/** Where onnxruntime-node keeps its CUDA provider library on this platform. */
export function cudaLibraryPath(): string {
  const require = createRequire(import.meta.url);
  const packageDir = dirname(require.resolve("onnxruntime-node/package.json"));
  return join(
    packageDir,
    "bin",
    "napi-v6",
    process.platform,
    process.arch,
    "libonnxruntime_providers_cuda.so",
  );
}

export async function cudaLibraryCheck(
  path: string,
  providers: readonly ExecutionProvider[],
): Promise<CheckResult> {
  const name = "CUDA provider libraries";
  try {
    await access(path);
    return { name, status: "pass", detail: path };
  } catch {
    return {
      name,
      status: cudaSeverity(providers),
      detail: `missing: ${path}`,
      hint: "fetch them with `ONNXRUNTIME_NODE_INSTALL=cuda12 node node_modules/onnxruntime-node/script/install` (needs CUDA 12 and cuDNN 9)",
    };
  }
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
