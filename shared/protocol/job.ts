import { z } from "zod";
import { JobError } from "./error.ts";
import { JobProgress } from "./progress.ts";
import { WebhookSubscription } from "./webhook-subscription.ts";

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

/** Shares a tenant's portion of the agents among its own users (gateway/jobs/fair-order.ts). */
export const FairnessKey = z
  .string()
  .min(1)
  .max(64)
  .describe(
    "Your own key for who the job is for (an end user, a project): your jobs waiting in the same band are released in turn by key, so one key's backlog does not hold up the others.",
  );
export type FairnessKey = z.infer<typeof FairnessKey>;

/** Why a queued job has not started yet (gateway/jobs/waiting.ts). */
export const WaitingReason = z
  .enum([
    "behind_jobs",
    "tenant_concurrency_limit",
    "model_paused",
    "no_agent_for_model",
    "agents_unhealthy",
    "agents_busy",
    "starting",
    "delayed",
  ])
  .describe(
    "Why a queued job waits: `behind_jobs` (see `queue_position`), `tenant_concurrency_limit` (your `max_running_jobs` are running), `model_paused`, `no_agent_for_model` (no live agent serves it), `agents_unhealthy` (those that serve it are failing or gone), `agents_busy` (every slot busy with higher-priority or other tenants' work), `starting` (it is next and an agent has a free slot: it starts in a moment), `delayed` (a retry's backoff).",
  );
export type WaitingReason = z.infer<typeof WaitingReason>;

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
  fairness_key: FairnessKey.optional(),
});
export type JobRequest = z.infer<typeof JobRequest>;

export const JobMetrics = z.object({
  queue_ms: z.number().int().describe("From creation to the start of the latest attempt."),
  run_ms: z.number().int().nullable().describe("The latest attempt's run; null while running."),
  total_ms: z.number().int().nullable().describe("From creation to the end; null until then."),
  gpu_ms: z
    .number()
    .int()
    .optional()
    .describe(
      "Device time of the runs that ended the job (succeeded, or failed by its own input), as its agents measured it; what usage bills. A batch's time is split across its items.",
    ),
  wasted_gpu_ms: z
    .number()
    .int()
    .optional()
    .describe(
      "Device time of runs the fleet lost (a crash, an eviction; a run whose agent vanished counts from its start to its last heartbeat); never billed.",
    ),
  provider: z.string().optional().describe("Execution provider of its latest run (`cuda`, `cpu`)."),
  device: z
    .string()
    .optional()
    .describe("The device its latest run ran on, as its agent named it."),
  load_ms: z
    .number()
    .int()
    .optional()
    .describe(
      "How long its latest run waited for its model to load on its runner (absent: the model was loaded already).",
    ),
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
      "On a queued job (`GET /v1/jobs/{id}`): 1 when it is next, counting the queued jobs of its model an agent takes before it: those already released to the queue, then higher priority first and, within a priority, the fair release's turns by tenant (share weight) and `fairness_key`, oldest first within each.",
    ),
  fairness_key: FairnessKey.optional(),
  waiting_reason: WaitingReason.optional(),
  waiting_detail: z
    .string()
    .optional()
    .describe("On a queued job, with `waiting_reason`: one line a person can read."),
  estimated_start_at: z.iso
    .datetime()
    .nullable()
    .optional()
    .describe(
      "On a queued job: when it should start at the model's pace over the last minutes; null when the model has no recent pace, and while nothing can start it (the model paused, no live agent serving it).",
    ),
  metrics: JobMetrics.optional().describe("Once started: where the job's time went."),
  trace_id: z
    .string()
    .regex(/^[0-9a-f]{32}$/)
    .optional()
    .describe(
      "The W3C trace the job belongs to: the request's `traceparent`, else one the gateway started.",
    ),
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
  waiting_reason: WaitingReason.optional().describe(
    "Why a queued job waits: on `GET /v1/jobs/{id}/events` with its latest event; on `GET /v1/events` with each live `queued` event (judged per tenant and model, at most `queueDepthCacheMs` old; not on a resume's replayed events).",
  ),
  waiting_detail: z.string().optional(),
});
export type JobEvent = z.infer<typeof JobEvent>;
