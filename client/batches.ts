import type { Batch, BatchRequest, JobList } from "../shared/protocol/index.ts";
import type { Transport } from "./http.ts";
import type { TypedJob } from "./types.ts";

export interface BatchCreateOptions {
  /** Sent as `Idempotency-Key` (generated when absent), as `jobs.create` does. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface BatchJobsOptions {
  /** Page size (1-100). */
  limit?: number;
  signal?: AbortSignal;
}

/** `batches.*`: many jobs of one model in one request (`POST /v1/batches`), followed as one. */
export class Batches {
  constructor(private readonly transport: Transport) {}

  /**
   * Makes the batch. Items the gateway refuses are listed in `errors` by their index; the
   * others are queued (unless `atomic`, where one bad item refuses all with a 422).
   *
   * Retried like any call, under the same key: the gateway makes a batch once per key, so a
   * request whose answer was lost is answered again with the batch it made.
   */
  create(request: BatchRequest, options: BatchCreateOptions = {}): Promise<Batch> {
    return this.transport.json<Batch>({
      method: "POST",
      path: "/v1/batches",
      json: request,
      headers: { "idempotency-key": options.idempotencyKey ?? crypto.randomUUID() },
      signal: options.signal,
    });
  }

  /** The batch with its `request_counts`, read from its jobs. */
  get(id: string, options: { signal?: AbortSignal } = {}): Promise<Batch> {
    return this.transport.json<Batch>({
      path: `/v1/batches/${encodeURIComponent(id)}`,
      signal: options.signal,
    });
  }

  /** Cancels every job of the batch still queued or running. */
  cancel(id: string, options: { signal?: AbortSignal } = {}): Promise<Batch> {
    return this.transport.json<Batch>({
      method: "POST",
      path: `/v1/batches/${encodeURIComponent(id)}/cancel`,
      signal: options.signal,
    });
  }

  /** The batch's jobs, one page after another, oldest first, fetched as the caller gets to it. */
  async *pages(id: string, options: BatchJobsOptions = {}): AsyncGenerator<JobList> {
    let cursor: string | undefined;
    do {
      const page = await this.transport.json<JobList>({
        path: `/v1/batches/${encodeURIComponent(id)}/jobs`,
        query: { limit: options.limit, cursor },
        signal: options.signal,
      });
      yield page;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** Every job of the batch: `for await (const job of gantry.batches.jobs(id))`. */
  async *jobs(id: string, options: BatchJobsOptions = {}): AsyncGenerator<TypedJob> {
    for await (const page of this.pages(id, options)) yield* page.data as TypedJob[];
  }
}
