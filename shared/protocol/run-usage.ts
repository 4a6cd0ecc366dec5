import { z } from "zod";

/** Where a run ran: an onnxruntime execution provider. */
export const ExecutionProviderName = z.enum(["cuda", "cpu"]);

/**
 * What the attempt's run used, on its report: the gateway keeps it on the job and rolls it
 * up as usage (billed when the run ended the job, else counted as wasted). Absent from
 * older agents, and on an attempt that never reached a runner.
 */
export const runUsageFields = {
  /** Its runner's time on the device, ms; a batch's time split evenly across its items. */
  gpu_ms: z
    .number()
    .min(0)
    .max(7 * 24 * 3600 * 1000)
    .optional(),
  provider: ExecutionProviderName.optional(),
  /** The device it ran on (`NVIDIA H100 80GB HBM3`, or the CPU's model name). */
  device: z.string().max(200).optional(),
  /** How long the run waited for its model to load on its runner, ms; absent: warm. */
  load_ms: z
    .number()
    .min(0)
    .max(24 * 3600 * 1000)
    .optional(),
};
