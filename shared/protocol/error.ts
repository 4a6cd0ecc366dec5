import { z } from "zod";

/**
 * How a failure crosses process and queue boundaries. `permanent` failures (bad input,
 * unknown model) end the job at once; `transient` ones are retried with backoff.
 */
export const JobError = z.object({
  type: z.enum(["permanent", "transient"]),
  code: z.string().min(1).max(64),
  message: z.string().max(2000),
});
export type JobError = z.infer<typeof JobError>;

/** RFC 9457 problem details, the body of every error response. */
export const Problem = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    code: z
      .string()
      .describe(
        "A stable, machine-readable code (`validation_failed`): the last segment of `type`.",
      ),
    detail: z.string().optional(),
    instance: z.string().optional(),
    errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .catchall(z.unknown());
export type Problem = z.infer<typeof Problem>;
