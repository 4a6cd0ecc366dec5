import { execFile } from "node:child_process";

/** One GPU as `nvidia-smi` reports it; memory in MiB, utilisation in %, temperature in °C. */
export interface GpuInfo {
  /** nvidia-smi's index: the host's numbering, whatever CUDA_VISIBLE_DEVICES says. */
  index: number;
  name: string;
  driver: string;
  memoryUsedMiB: number;
  memoryFreeMiB: number;
  memoryTotalMiB: number;
  /** Null when the driver does not say ("[N/A]", or an older query without the column). */
  utilization: number | null;
  temperature: number | null;
  uuid: string | null;
}

/** Runs `nvidia-smi` with these arguments: its stdout, or a rejection (ENOENT when absent). */
export type NvidiaSmi = (args: string[]) => Promise<string>;

export const runNvidiaSmi: NvidiaSmi = (args) =>
  new Promise((resolve, reject) => {
    // A wedged driver can make nvidia-smi hang for minutes; a doctor or heartbeat must answer.
    execFile("nvidia-smi", args, { timeout: 15_000 }, (error, stdout, stderr) => {
      if (error) reject(Object.assign(error, { stderr: String(stderr).trim() }));
      else resolve(String(stdout));
    });
  });

/**
 * The columns asked for, the first six as the doctor always asked (so an older stub or
 * driver that answers only those still parses), the readings of the GPU's state after.
 */
export const GPU_QUERY = [
  "--query-gpu=index,name,driver_version,memory.used,memory.free,memory.total,utilization.gpu,temperature.gpu,uuid",
  "--format=csv,noheader,nounits",
];

export type GpuQueryResult = { gpus: GpuInfo[] } | { missing: true } | { error: string };

/** The GPUs, `missing` when the driver is absent, or the driver's own error. */
export async function queryGpus(smi: NvidiaSmi = runNvidiaSmi): Promise<GpuQueryResult> {
  let output: string;
  try {
    output = await smi(GPU_QUERY);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { missing: true };
    const stderr = (error as { stderr?: string }).stderr;
    return { error: stderr || (error instanceof Error ? error.message : String(error)) };
  }
  return { gpus: parseGpuLines(output) };
}

/** nvidia-smi's CSV lines; a value it cannot read (`[N/A]`, `[Not Supported]`) is null. */
export function parseGpuLines(output: string): GpuInfo[] {
  const reading = (field: string | undefined) => {
    const value = Number(field);
    return field === undefined || field === "" || !Number.isFinite(value) ? null : value;
  };
  return output
    .split("\n")
    .map((line) => line.split(",").map((field) => field.trim()))
    .filter((fields) => fields.length >= 6 && /^\d+$/.test(fields[0] ?? ""))
    .map(([index, name, driver, used, free, total, utilization, temperature, uuid]) => ({
      index: Number(index),
      name: name ?? "?",
      driver: driver ?? "?",
      memoryUsedMiB: Number(used),
      memoryFreeMiB: Number(free),
      memoryTotalMiB: Number(total),
      utilization: reading(utilization),
      temperature: reading(temperature),
      uuid: uuid || null,
    }));
}

/**
 * GPU memory each process holds (MiB, by pid): how a runner measures what a model it just
 * loaded takes on the device. Empty when nvidia-smi cannot say.
 */
export async function gpuMemoryByPid(smi: NvidiaSmi = runNvidiaSmi): Promise<Map<number, number>> {
  const byPid = new Map<number, number>();
  try {
    const output = await smi([
      "--query-compute-apps=pid,used_memory",
      "--format=csv,noheader,nounits",
    ]);
    for (const line of output.split("\n")) {
      const [pid, used] = line.split(",").map((field) => Number(field.trim()));
      if (Number.isInteger(pid) && Number.isFinite(used)) {
        byPid.set(pid!, (byPid.get(pid!) ?? 0) + used!);
      }
    }
  } catch {
    // No driver, or it does not list processes (some containers): the caller falls back.
  }
  return byPid;
}
