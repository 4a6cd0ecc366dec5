import { z } from "zod";
import { Job, JobId, ModelId } from "./job.ts";
import { Instant } from "./usage.ts";

/** A failed job as the operator sees it: the job, and whose it is. */
export const DeadLetter = Job.extend({ tenant_id: z.string() });
export type DeadLetter = z.infer<typeof DeadLetter>;

export const DeadLetterList = z.object({
  object: z.literal("list"),
  data: z.array(DeadLetter),
  next_cursor: z.string().nullable(),
});
export type DeadLetterList = z.infer<typeof DeadLetterList>;

/**
 * Which dead letters a redrive puts back in the queue. One call handles at most `limit`;
 * `cursor` (the last call's `next_cursor`) resumes the pass where it stopped.
 */
export const RedriveRequest = z.strictObject({
  model: ModelId.optional(),
  code: z.string().min(1).max(100).optional(),
  since: Instant.optional().describe("Only jobs that failed at or after this day or instant."),
  limit: z.number().int().min(1).max(500).default(100),
  cursor: JobId.optional(),
});
export type RedriveRequest = z.infer<typeof RedriveRequest>;

export const RedriveResult = z.object({
  object: z.literal("redrive"),
  redriven: z.array(z.string()).describe("The ids queued again."),
  skipped: z
    .array(z.object({ id: z.string(), code: z.string() }))
    .describe("Matched but not queued again (changed meanwhile, or model no longer served)."),
  next_cursor: z.string().nullable().describe("Call again with this to go on; null when done."),
});
export type RedriveResult = z.infer<typeof RedriveResult>;
