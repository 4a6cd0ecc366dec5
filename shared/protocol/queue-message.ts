import { z } from "zod";
import { JobId, ModelId } from "./job.ts";

/**
 * What travels on the queue: small, versioned and language-neutral. Everything else
 * (inputs, output location) the agent claims from the gateway.
 */
export const QueueMessage = z.object({
  v: z.literal(1),
  id: JobId,
  model: ModelId,
  priority: z.number().int().min(0).max(9),
  attempt: z
    .number()
    .int()
    .min(0)
    .describe("Attempts already made when this message was published."),
  deadline: z.iso.datetime().describe("After this instant a still-queued job is expired, not run."),
  traceparent: z.string().max(55).optional(),
});
export type QueueMessage = z.infer<typeof QueueMessage>;
