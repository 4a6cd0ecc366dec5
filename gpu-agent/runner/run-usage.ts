import { cpus } from "node:os";
import type { ExecutionProvider, RunResult } from "../inference/types.ts";
import type { BatchTimings } from "./child-protocol.ts";

/**
 * What each run of a batch used, stamped on its result for the supervisor's report (the
 * gateway bills it, issue 28): its share of the batch's time on the device, the execution
 * provider and the device's name. A batch that came back measured splits the child's device
 * time (`timings.deviceMs`) evenly across its items; one without timings is stamped with
 * where it ran only.
 */
export function stampRunUsage(
  results: RunResult[],
  run: { count: number },
  where: { provider: ExecutionProvider | null; gpu?: number | undefined },
  timings?: BatchTimings,
): RunResult[] {
  const device = deviceName(where.provider, where.gpu);
  const provider = where.provider ?? undefined;
  const gpuMs = timings ? Math.max(0, timings.deviceMs / Math.max(1, run.count)) : undefined;
  return results.map((result) => ({
    ...result,
    usage: { ...(gpuMs === undefined ? {} : { gpuMs }), provider, device },
  }));
}

let cpuModel: string | undefined;

/** `cuda:0` for a GPU by its nvidia-smi index, `cuda` without one, else the CPU's model name. */
function deviceName(provider: ExecutionProvider | null, gpu: number | undefined): string {
  if (provider === "cuda") return gpu === undefined ? "cuda" : `cuda:${gpu}`;
  cpuModel ??= cpus()[0]?.model.trim() || "cpu";
  return cpuModel;
}
