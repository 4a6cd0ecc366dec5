import type {
  Job,
  JobList,
  JobProgressEvent,
  JobRequest,
  JobStatus,
} from "../shared/protocol/index.ts";
import { APIError, ConnectionError } from "./errors.ts";
import { type EventsOptions, jobEvents } from "./events.ts";
import { metadataQuery, sleep, type Transport } from "./http.ts";
import type { JobStreamEvent, JobUpdate, TypedJob } from "./types.ts";

const TERMINAL = new Set<JobStatus>(["succeeded", "failed", "canceled", "expired"]);
export const isDone = (job: Pick<Job, "status">): boolean => TERMINAL.has(job.status);

export interface CreateOptions {
  /** Same key and body, same job: a retried submit never makes two. Generated when absent. */
  idempotencyKey?: string;
  /**
   * Ask the gateway to hold the answer up to this many seconds until the job is done
   * (`Prefer: wait=N`); a gateway without support answers at once, as usual.
   */
  wait?: number;
  /**
   * The job's execution limit (`timeout_seconds`), unless the request names one: past it the
   * job fails with `timeout`. Default: the model's; at most the plan's `max_timeout_seconds`.
   */
  timeout_seconds?: number;
  signal?: AbortSignal;
}

export interface WaitOptions {
  signal?: AbortSignal;
  onProgress?: (update: JobUpdate) => void;
}

export interface ListOptions {
  status?: JobStatus;
  /** Only this model's jobs. */
  model?: string;
  /** Only jobs whose metadata holds each of these (`metadata.KEY=VALUE`; at most 4). */
  metadata?: Record<string, string>;
  /** Page size (1-100). */
  limit?: number;
  signal?: AbortSignal;
}

const POLL_MIN_MS = 250;
const POLL_MAX_MS = 5_000;

/** `jobs.*`: submit, read, cancel, list, wait for and follow jobs. */
export class Jobs {
  constructor(private readonly transport: Transport) {}

  async create<M extends string>(
    request: JobRequest & { model: M },
    options: CreateOptions = {},
  ): Promise<TypedJob<M>> {
    return this.transport.json<TypedJob<M>>({
      method: "POST",
      path: "/v1/jobs",
      json:
        options.timeout_seconds === undefined || request.timeout_seconds !== undefined
          ? request
          : { ...request, timeout_seconds: options.timeout_seconds },
      headers: {
        "idempotency-key": options.idempotencyKey ?? crypto.randomUUID(),
        ...(options.wait ? { prefer: `wait=${Math.ceil(options.wait)}` } : {}),
      },
      signal: options.signal,
    });
  }

  get<M extends string = string>(id: string, options: { signal?: AbortSignal } = {}) {
    return this.transport.json<TypedJob<M>>({
      path: `/v1/jobs/${encodeURIComponent(id)}`,
      signal: options.signal,
    });
  }

  cancel(id: string, options: { signal?: AbortSignal } = {}): Promise<TypedJob> {
    return this.transport.json<TypedJob>({
      method: "POST",
      path: `/v1/jobs/${encodeURIComponent(id)}/cancel`,
      signal: options.signal,
    });
  }

  /**
   * Puts a `failed`, `expired` or `canceled` job back in the queue under the same id
   * (`POST /v1/jobs/{id}/retry`): its attempts start again. `409 job_not_retryable` for a
   * job that is queued, running or succeeded.
   */
  retry(id: string, options: { signal?: AbortSignal } = {}): Promise<TypedJob> {
    return this.transport.json<TypedJob>({
      method: "POST",
      path: `/v1/jobs/${encodeURIComponent(id)}/retry`,
      signal: options.signal,
    });
  }

  /**
   * A stored input of the job (`input(id, "image")`: the file its `input.image` upload
   * holds) as a Blob. `410 input_expired` once retention deleted it.
   */
  async input(id: string, name: string, options: { signal?: AbortSignal } = {}): Promise<Blob> {
    // A redirect to a short-lived presigned GET; fetch follows it, and drops the bearer
    // key when the redirect leaves the gateway's origin.
    const response = await this.transport.call({
      path: `/v1/jobs/${encodeURIComponent(id)}/inputs/${encodeURIComponent(name)}`,
      signal: options.signal,
    });
    return response.blob();
  }

  /** Every page of jobs, newest first, fetched as the caller gets to it. */
  async *pages(options: ListOptions = {}): AsyncGenerator<JobList> {
    let cursor: string | undefined;
    do {
      const page = await this.transport.json<JobList>({
        path: "/v1/jobs",
        query: {
          status: options.status,
          model: options.model,
          ...metadataQuery(options.metadata),
          limit: options.limit,
          cursor,
        },
        signal: options.signal,
      });
      yield page;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** Every job over every page: `for await (const job of gantry.jobs.list())`. */
  async *list(options: ListOptions = {}): AsyncGenerator<TypedJob> {
    for await (const page of this.pages(options)) yield* page.data as TypedJob[];
  }

  events(id: string, options: EventsOptions = {}): AsyncGenerator<JobStreamEvent> {
    return jobEvents(this.transport, id, options);
  }

  /**
   * Resolves with the job once it is done (whatever its end: check `status`). Follows the
   * event stream; where no stream can be had (a proxy that buffers it, a gateway without
   * one), polls with backoff instead.
   */
  async wait<M extends string = string>(
    id: string,
    options: WaitOptions = {},
  ): Promise<TypedJob<M>> {
    try {
      for await (const event of this.events(id, options.signal ? { signal: options.signal } : {})) {
        const update: JobUpdate =
          event.type === "status"
            ? {
                job_id: event.data.job_id,
                status: event.data.status,
                attempt: event.data.attempt,
                ...(event.data.waiting_reason ? { waiting_reason: event.data.waiting_reason } : {}),
                ...(event.data.waiting_detail ? { waiting_detail: event.data.waiting_detail } : {}),
              }
            : progressUpdate(event.data);
        options.onProgress?.(update);
      }
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      // No stream to be had: a proxy that refuses or buffers them, a gateway without one, or
      // one whose place for the tenant's job streams is taken (more waits than it keeps
      // streams for): each polls instead.
      const noStream =
        error instanceof ConnectionError ||
        (error instanceof APIError &&
          (error.code === "too_many_streams" ||
            ([404, 405, 406, 501].includes(error.status) && error.code !== "not_found")));
      if (!noStream) throw error;
      return this.poll<M>(id, options);
    }
    const job = await this.get<M>(id, options.signal ? { signal: options.signal } : {});
    // The terminal event is written with the job's end: a read right after sees it done.
    return isDone(job) ? job : this.poll<M>(id, options);
  }

  private async poll<M extends string>(id: string, options: WaitOptions): Promise<TypedJob<M>> {
    let delay = POLL_MIN_MS;
    let last: JobStatus | undefined;
    for (;;) {
      const job = await this.get<M>(id, options.signal ? { signal: options.signal } : {});
      if (job.status !== last)
        options.onProgress?.({ job_id: job.id, status: job.status, attempt: job.attempt });
      last = job.status;
      if (isDone(job)) return job;
      await sleep(delay, options.signal);
      delay = Math.min(POLL_MAX_MS, delay * 1.5);
    }
  }
}

/** A `progress` event as an update: the job is running, `fraction` done, at `stage`. */
function progressUpdate(event: JobProgressEvent): JobUpdate {
  return {
    job_id: event.job_id,
    status: "running",
    attempt: event.attempt,
    progress: event.fraction,
    stage: event.stage,
    ...(event.message === null ? {} : { message: event.message }),
  };
}
