import { z } from "zod";

/** One GPU of an agent, as its heartbeat describes it (nvidia-smi's readings). */
export const AgentDevice = z.object({
  /** nvidia-smi's index on the agent's host. */
  index: z.number().int().min(0).max(1023),
  name: z.string().max(200),
  vram_total_mb: z
    .number()
    .int()
    .min(0)
    .max(16 * 1024 * 1024),
  vram_used_mb: z
    .number()
    .int()
    .min(0)
    .max(16 * 1024 * 1024),
  /** GPU utilisation, percent; null when the driver does not say. */
  utilization: z.number().min(0).max(100).nullable(),
  /** Degrees Celsius; null when the driver does not say. */
  temperature: z.number().min(-100).max(200).nullable().optional(),
  /** The models loaded on this GPU's runners now. */
  models: z.array(z.string().max(200)).max(100),
  /** Taken out after its runners kept failing: it gets no more jobs. */
  failed: z.boolean().optional(),
});
export type AgentDevice = z.infer<typeof AgentDevice>;
