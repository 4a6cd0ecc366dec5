import type { Job, JobEvent, JobStatus } from "../shared/protocol/index.ts";

export type {
  Job,
  JobError,
  JobEvent,
  JobList,
  JobStatus,
  Upload,
  WebhookPayload,
} from "../shared/protocol/index.ts";

/** One OCR line: its text, the recogniser's confidence, and its quadrilateral in pixels. */
export interface OcrLine {
  text: string;
  score: number;
  box: [number, number][];
}

/**
 * The `output` of each built-in model, so `run("ocr", …)` is typed by its task. Models the
 * SDK does not know yet are `unknown`; a program can add its own by declaration merging:
 * `declare module "gantry/client" { interface ModelOutputs { rmbg: {…} } }`.
 */
export interface ModelOutputs {
  ocr: { text: string; lines: OcrLine[] };
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
  /** 0 to 1, as the model reports it while running. */
  progress?: number;
  message?: string;
}

/** One event of `GET /v1/jobs/{id}/events`: a state change, or progress beside it. */
export type JobStreamEvent =
  | { type: "status"; id: string | undefined; data: JobEvent }
  | { type: "progress"; id: string | undefined; data: JobUpdate };
