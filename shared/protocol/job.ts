import { z } from "zod";
import { JobError } from "./error.ts";
import { JobProgress } from "./progress.ts";

export const JobStatus = z.enum([
  "queued",
  "running",
  "succeeded",
  "failed",
  "canceled",
  "expired",
]);
export type JobStatus = z.infer<typeof JobStatus>;

export const TERMINAL_STATUSES: readonly JobStatus[] = [
  "succeeded",
  "failed",
  "canceled",
  "expired",
];
export const isTerminal = (status: JobStatus): boolean => TERMINAL_STATUSES.includes(status);

export const ModelId = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[a-z0-9][a-z0-9._-]*$/, "lowercase letters, digits, '.', '_' or '-'");
export type ModelId = z.infer<typeof ModelId>;

export const JobId = z.string().regex(/^job_[0-9a-z]{26}$/, "a job id (job_…)");

const UPLOAD_ID = /^upl_[0-9a-z]{26}$/;
const isHttpsUrl = (value: string): boolean => {
  try {
    return new URL(value).protocol === "https:";
  } catch {
    return false;
  }
};

export const UploadId = z.string().regex(UPLOAD_ID, "an upload id (upl_…)");

/** An input file: an upload made through `POST /v1/uploads`, or an https URL. */
export const InputRef = z
  .string()
  .max(2048)
  .refine((v) => UPLOAD_ID.test(v) || isHttpsUrl(v), "must be an upload id (upl_…) or an https URL")
  .describe("An upload id (upl_…) or an https URL.");
export type InputRef = z.infer<typeof InputRef>;

export const JobInput = z
  .object({ image: InputRef.optional() })
  .catchall(z.unknown())
  .describe(
    "Model inputs. `image` is an upload id or an https URL; other keys are model parameters.",
  );
export type JobInput = z.infer<typeof JobInput>;

export const WebhookEventType = z.enum([
  "job.running",
  "job.succeeded",
  "job.failed",
  "job.canceled",
  "job.expired",
]);
export type WebhookEventType = z.infer<typeof WebhookEventType>;

export const WebhookSubscription = z.strictObject({
  url: z.url({ protocol: /^https?$/ }).max(2048),
  events: z.array(WebhookEventType).min(1).max(5).optional(),
});
export type WebhookSubscription = z.infer<typeof WebhookSubscription>;

const METADATA_KEY = /^[A-Za-z0-9_.-]{1,64}$/;
export const METADATA_MAX_KEYS = 16;

/**
 * The client's own labels on a job: returned on the job and in its webhooks, and filterable
 * on `GET /v1/jobs?metadata.KEY=VALUE`. Bounded so that a job row stays small.
 */
export const JobMetadata = z
  .record(
    z.string().regex(METADATA_KEY, "letters, digits, '_', '.' or '-' (1-64)"),
    z.string().max(512),
  )
  .refine((value) => Object.keys(value).length <= METADATA_MAX_KEYS, {
    message: `at most ${METADATA_MAX_KEYS} keys`,
  })
  .describe("Up to 16 string keys (1-64 of `A-Za-z0-9_.-`) with string values (≤ 512).")
  .meta({ maxProperties: METADATA_MAX_KEYS, example: { customer: "acme", invoice: "inv-42" } });
export type JobMetadata = z.infer<typeof JobMetadata>;

/** A job's longest execution limit, whatever plan or model says (one day). */
export const MAX_TIMEOUT_SECONDS = 86_400;

/** How long one run of a job may take before the agent stops it (`timeout`). */
export const TimeoutSeconds = z.number().int().min(1).max(MAX_TIMEOUT_SECONDS);

export const JobRequest = z.strictObject({
  model: ModelId,
  input: JobInput,
  webhook: WebhookSubscription.optional(),
  priority: z
    .number()
    .int()
    .min(0)
    .max(9)
    .optional()
    .describe(
      "0 (lowest) to 9 (highest), clamped into your plan's priority band; the plan's default when omitted.",
    ),
  ttl_seconds: z
    .number()
    .int()
    .min(10)
    .max(7 * 24 * 3600)
    .optional()
    .describe("A job still queued after this long becomes `expired`. Default 86400."),
  metadata: JobMetadata.optional(),
  timeout_seconds: TimeoutSeconds.optional().describe(
    "Longest run of one attempt; past it the agent stops the run and the job fails with `timeout`. Default: the model's (`GET /v1/models`); at most your plan's `max_timeout_seconds`.",
  ),
});
export type JobRequest = z.infer<typeof JobRequest>;

export const JobMetrics = z.object({
  queue_ms: z.number().int().describe("From creation to the start of the latest attempt."),
  run_ms: z.number().int().nullable().describe("The latest attempt's run; null while running."),
  total_ms: z.number().int().nullable().describe("From creation to the end; null until then."),
});
export type JobMetrics = z.infer<typeof JobMetrics>;

export const JobAgent = z.object({
  id: z.string().describe("The agent's id (`agt_…`)."),
  provider: z
    .string()
    .nullable()
    .describe("The execution provider it runs models on (`cuda`, `cpu`), as it registered."),
});
export type JobAgent = z.infer<typeof JobAgent>;

export const Job = z.object({
  id: JobId,
  object: z.literal("job"),
  model: ModelId,
  status: JobStatus,
  priority: z.number().int(),
  input: JobInput,
  output: z.unknown().nullable(),
  error: JobError.nullable(),
  attempt: z.number().int().describe("How many times an agent has started this job."),
  webhook: WebhookSubscription.nullable(),
  created_at: z.iso.datetime(),
  started_at: z.iso.datetime().nullable(),
  finished_at: z.iso.datetime().nullable(),
  expires_at: z.iso.datetime().describe("When a job still queued becomes `expired`."),
  metadata: JobMetadata.optional().describe("The metadata the job was submitted with, if any."),
  timeout_seconds: z
    .number()
    .int()
    .optional()
    .describe("Its execution limit: the one it was submitted with, or its model's default."),
  queue_position: z
    .number()
    .int()
    .positive()
    .optional()
    .describe(
      "On a queued job (`GET /v1/jobs/{id}`): 1 when it is next, counting the queued jobs of its model an agent takes before it (higher priority first, then older).",
    ),
  estimated_start_at: z.iso
    .datetime()
    .nullable()
    .optional()
    .describe(
      "On a queued job: when it should start at the model's pace over the last minutes; null when the model has no recent pace.",
    ),
  metrics: JobMetrics.optional().describe("Once started: where the job's time went."),
  agent: JobAgent.optional().describe("Once started: the agent that ran (or runs) it."),
  progress: JobProgress.nullable()
    .optional()
    .describe(
      "Once started: the latest progress its model reported (null if none). Kept when the job ends where it stopped; `fraction` is 1 once it succeeded. Cleared when it goes back in the queue.",
    ),
  output_expired: z
    .literal(true)
    .optional()
    .describe(
      "Present once retention deleted the job's output and artifacts: `output` is null because it is gone, not because the job produced none.",
    ),
  input_expired: z
    .literal(true)
    .optional()
    .describe("Present once retention deleted the upload the job's `input.image` named."),
  data_expired_at: z.iso
    .datetime()
    .optional()
    .describe("When retention deleted the output and artifacts (with `output_expired`)."),
});
export type Job = z.infer<typeof Job>;

export const JobList = z.object({
  object: z.literal("list"),
  data: z.array(Job),
  next_cursor: z.string().nullable(),
});
export type JobList = z.infer<typeof JobList>;

/** One state change, as stored and as streamed on `GET /v1/jobs/{id}/events`. */
export const JobEvent = z.object({
  job_id: JobId,
  seq: z.number().int().positive(),
  status: JobStatus,
  at: z.iso.datetime(),
  attempt: z.number().int(),
  error: JobError.nullable().optional(),
});
export type JobEvent = z.infer<typeof JobEvent>;
