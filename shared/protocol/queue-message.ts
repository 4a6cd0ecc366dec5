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

/**
 * One delivery of the gateway's `sql` queue to an agent (agent-queue.ts): opaque to the
 * agent, named by every settle of it, and by the report of a success that the gateway acks
 * with it (agent.ts, `ack_receipt`).
 */
export const QueueReceipt = z.string().regex(/^\d{1,18}\.[A-Za-z0-9_-]{1,64}$/);
