import type { JobRequest } from "../shared/protocol/index.ts";
import { Batches } from "./batches.ts";
import { GantryError, JobFailedError } from "./errors.ts";
import { type TenantEventsOptions, type TenantStreamEvent, tenantEvents } from "./events.ts";
import { type FileInput, isInputRef } from "./files.ts";
import { type FetchLike, Transport } from "./http.ts";
import { isDone, Jobs } from "./jobs.ts";
import { Models } from "./models.ts";
import type { JobUpdate, OutputOf } from "./types.ts";
import { Artifacts, Uploads } from "./uploads.ts";
import { Usage } from "./usage.ts";
import { verifyWebhook } from "./webhooks.ts";

export type { BatchCreateOptions, BatchJobsOptions } from "./batches.ts";
export * from "./errors.ts";
export type { TenantEventsOptions, TenantStreamEvent } from "./events.ts";
export type { FileInput } from "./files.ts";
export type { FetchLike } from "./http.ts";
export type { CreateOptions, ListOptions, WaitOptions } from "./jobs.ts";
export type { ModelInfo } from "./models.ts";
export type * from "./types.ts";
export type { UploadOptions } from "./uploads.ts";
export type { UsageOptions, UsageReport, UsageRow } from "./usage.ts";
export type { WebhookEvent, WebhookHeaders } from "./webhooks.ts";

export interface GantryOptions {
  /** Default: `GANTRY_URL`, else the embedded default `http://127.0.0.1:8787`. */
  baseUrl?: string;
  /** Default: `GANTRY_KEY`. */
  apiKey?: string;
  /** Retries of one request after a connection error, 408, 429 or 5xx. Default 2. */
  maxRetries?: number;
  /** Per attempt. Default 60 000. */
  timeoutMs?: number;
  /** Default: the global `fetch`. */
  fetch?: FetchLike;
}

/** `input` of `run`: `image` as anything `uploads.create` takes; the rest, model parameters. */
export type RunInput = { image?: FileInput } & Record<string, unknown>;

export interface RunOptions {
  /**
   * Seconds the gateway may hold the submit open for the result (`Prefer: wait`). Default
   * 60, or 0 (never ask) with `onProgress`, which follows the job's event stream instead.
   */
  wait?: number;
  signal?: AbortSignal;
  /** Each status change and, while the job runs, each progress report its model makes. */
  onProgress?: (update: JobUpdate) => void;
  idempotencyKey?: string;
  priority?: number;
  ttl_seconds?: number;
  webhook?: JobRequest["webhook"];
}

/** Reads the environment where there is one (Node, Bun, Deno); browsers and Workers have none. */
function fromEnv(name: string): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process
    ?.env;
  return env?.[name] || undefined;
}

/** The Gantry API client: `new Gantry()` then `await gantry.run("ocr", { image })`. */
export class Gantry {
  readonly jobs: Jobs;
  readonly batches: Batches;
  readonly uploads: Uploads;
  readonly artifacts: Artifacts;
  readonly models: Models;
  readonly usage: Usage;
  readonly webhooks = { verify: verifyWebhook };
  readonly baseUrl: string;
  private readonly transport: Transport;

  constructor(options: GantryOptions = {}) {
    this.baseUrl = options.baseUrl ?? fromEnv("GANTRY_URL") ?? "http://127.0.0.1:8787";
    const apiKey = options.apiKey ?? fromEnv("GANTRY_KEY");
    if (!apiKey) throw new GantryError("no API key: pass { apiKey } or set GANTRY_KEY");
    // Bound to globalThis: browsers refuse a fetch called on another object.
    const fetcher = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    const transport = new Transport({
      baseUrl: this.baseUrl,
      apiKey,
      maxRetries: options.maxRetries ?? 2,
      timeoutMs: options.timeoutMs ?? 60_000,
      fetch: fetcher,
    });
    this.transport = transport;
    this.jobs = new Jobs(transport);
    this.batches = new Batches(transport);
    this.uploads = new Uploads(transport);
    this.artifacts = new Artifacts(transport);
    this.models = new Models(transport);
    this.usage = new Usage(transport);
  }

  /**
   * Every change of your jobs (`GET /v1/events`), filtered by model, status, batch or
   * metadata, resumed across dropped connections with nothing missed or repeated:
   * `for await (const event of gantry.events({ batch: id, signal })) …`.
   */
  events(options: TenantEventsOptions = {}): AsyncGenerator<TenantStreamEvent> {
    return tenantEvents(this.transport, options);
  }

  /**
   * Uploads `input.image` when it is a file, submits the job, waits for it and returns its
   * output; a job that fails, is canceled or expires throws `JobFailedError`.
   */
  async run<M extends string>(
    model: M,
    input: RunInput,
    options: RunOptions = {},
  ): Promise<OutputOf<M>> {
    const { signal, onProgress } = options;
    const { image, ...params } = input;
    const jobInput: Record<string, unknown> = { ...params };
    if (image !== undefined) {
      jobInput.image =
        typeof image === "string" && isInputRef(image)
          ? image
          : (await this.uploads.create(image, signal ? { signal } : {})).id;
    }
    let job = await this.jobs.create(
      {
        model,
        input: jobInput,
        ...(options.priority !== undefined ? { priority: options.priority } : {}),
        ...(options.ttl_seconds !== undefined ? { ttl_seconds: options.ttl_seconds } : {}),
        ...(options.webhook ? { webhook: options.webhook } : {}),
      },
      {
        // A held submit shows nothing until the end: progress needs the stream.
        wait: options.wait ?? (onProgress ? 0 : 60),
        ...(options.idempotencyKey ? { idempotencyKey: options.idempotencyKey } : {}),
        ...(signal ? { signal } : {}),
      },
    );
    onProgress?.({ job_id: job.id, status: job.status, attempt: job.attempt });
    if (!isDone(job))
      job = await this.jobs.wait<M>(job.id, {
        ...(signal ? { signal } : {}),
        ...(onProgress ? { onProgress } : {}),
      });
    if (job.status !== "succeeded") throw new JobFailedError(job);
    return job.output as OutputOf<M>;
  }
}

export default Gantry;
