import { z } from "zod";

/** Stages are short labels (`detection`, `recognition`, `sleeping`); messages a line of text. */
export const PROGRESS_STAGE_MAX = 64;
export const PROGRESS_MESSAGE_MAX = 256;

/**
 * What a pipeline reports while it runs, as the agent sends it to the gateway on a job
 * heartbeat. Latest wins: the agent coalesces reports and the gateway keeps only the last.
 */
export const ProgressReport = z.strictObject({
  fraction: z.number().min(0).max(1),
  stage: z.string().min(1).max(PROGRESS_STAGE_MAX),
  message: z.string().max(PROGRESS_MESSAGE_MAX).optional(),
});
export type ProgressReport = z.infer<typeof ProgressReport>;

/** A running job's latest progress, as the job resource and the event streams show it. */
export const JobProgress = z
  .object({
    fraction: z
      .number()
      .min(0)
      .max(1)
      .describe("How much of the run is done, 0 to 1, as the model reports it."),
    stage: z
      .string()
      .max(PROGRESS_STAGE_MAX)
      .describe("What the model is doing now (`detection`, `recognition`, …)."),
    message: z.string().max(PROGRESS_MESSAGE_MAX).nullable(),
    updated_at: z.iso.datetime().describe("When the agent reported it (as the gateway got it)."),
  })
  .meta({
    example: {
      fraction: 0.5,
      stage: "recognition",
      message: "line 3 of 6",
      updated_at: "2026-01-01T00:00:01.250Z",
    },
  });
export type JobProgress = z.infer<typeof JobProgress>;
