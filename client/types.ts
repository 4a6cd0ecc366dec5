import type { z } from "zod";
import type { Job, JobEvent, JobProgressEvent, JobStatus } from "../shared/protocol/index.ts";
import type { ModelTask, TASKS } from "../shared/tasks/index.ts";

export type {
  Batch,
  BatchCounts,
  BatchItem,
  BatchItemError,
  BatchRequest,
  BatchStatus,
  FeedEvent,
  Job,
  JobError,
  JobEvent,
  JobList,
  JobProgress,
  JobProgressEvent,
  JobStatus,
  Upload,
  WebhookPayload,
} from "../shared/protocol/index.ts";

/** Each task's `output` and parameters, from the task catalog (shared/tasks). */
export type TaskOutput<T extends ModelTask> = z.output<(typeof TASKS)[T]["output"]>;
export type TaskParams<T extends ModelTask> = z.input<(typeof TASKS)[T]["params"]>;
export type { ModelTask };

/**
 * The `output` of each model the SDK knows, so `run("ocr", …)` is typed by its task: the
 * built-in models are their task. A model served under another id (`rmbg` with
 * `GANTRY_MODEL_TASKS=rmbg=background-removal`) is `unknown` until the program names it by
 * declaration merging: `interface ModelOutputs { rmbg: TaskOutput<"background-removal"> }`.
 */
export interface ModelOutputs {
  /** The built-in `ocr` reads the text (a `detection_only` OCR model gives `{boxes}`). */
  ocr: Extract<TaskOutput<"ocr">, { text: string }>;
  /** `noop` echoes the parameters it was given. */
  noop: Record<string, unknown>;
}

export type OutputOf<M extends string> = M extends keyof ModelOutputs ? ModelOutputs[M] : unknown;

/** A job whose `output` is typed by its model. */
export type TypedJob<M extends string = string> = Omit<Job, "output"> & {
  model: M;
  output: OutputOf<M> | null;
};

/**
 * What the gateway reports while a job waits or runs. `queue_position` and `progress` are
 * sent by gateways that support them (absent otherwise).
 */
export interface JobUpdate {
  job_id: string;
  status: JobStatus;
  attempt?: number;
  /** Jobs ahead of this one in its model's queue. */
  queue_position?: number;
  /** Why a queued job waits (`behind_jobs`, `tenant_concurrency_limit`, …), and in words. */
  waiting_reason?: string;
  waiting_detail?: string;
  /** 0 to 1, as the model reports it while running (a `progress` event's `fraction`). */
  progress?: number;
  /** What the model is doing now (`detection`, `recognition`, …), with `progress`. */
  stage?: string;
  message?: string;
}

/**
 * One event of `GET /v1/jobs/{id}/events`: a state change, or a running job's progress
 * beside it (latest only, no `id`: progress is not replayed on a reconnect).
 */
export type JobStreamEvent =
  | { type: "status"; id: string | undefined; data: JobEvent }
  | { type: "progress"; id: string | undefined; data: JobProgressEvent };
