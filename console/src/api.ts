import { EventSourceParserStream } from "eventsource-parser/stream";
import { APIError } from "../../client/errors.ts";
import { metadataQuery, Transport } from "../../client/http.ts";
import { Gantry } from "../../client/index.ts";
import type { FeedEvent, JobProgressEvent } from "../../shared/protocol/feed.ts";
import type { Job, JobList, JobStatus } from "../../shared/protocol/index.ts";
import type { JobProgress } from "../../shared/protocol/progress.ts";
import type { WebhookDeliveryList } from "../../shared/protocol/webhook-api.ts";

export type { FeedEvent, Job, JobList, JobStatus };

/** A job's latest progress as the gateway shows it (`job.progress`, SSE `progress` data). */
export type Progress = JobProgress;
/** `event: progress` of `GET /v1/events`: latest only, without an SSE id. */
export type ProgressEvent = JobProgressEvent;
/** What the tenant's stream carries: state changes, and progress beside them. */
export type LiveEvent =
  | { kind: "status"; event: FeedEvent }
  | { kind: "progress"; event: ProgressEvent };

/** The job's progress; null until its model reports one (and from gateways without it). */
export const progressOf = (job: Job): Progress | null => job.progress ?? null;

export interface JobQuery {
  status?: JobStatus | undefined;
  /** Sent as `?model=`; the view also filters its page by it, for gateways without it. */
  model?: string | undefined;
  /** `metadata.KEY=VALUE` filters, all of which must match. */
  metadata?: Record<string, string>;
  cursor?: string | undefined;
  limit?: number;
}

/**
 * What the console calls: the SDK (`gantry/client`) for everything it offers, and the
 * SDK's own transport (same auth, retries and errors) for the few public endpoints the
 * SDK has no method for yet: one page of jobs from a cursor (the table's pages), retry, the
 * tenant's change feed, webhook deliveries and the admin API.
 */
export class ConsoleApi {
  readonly sdk: Gantry;
  private readonly transport: Transport;

  constructor(
    readonly apiKey: string,
    baseUrl = location.origin,
  ) {
    this.sdk = new Gantry({ apiKey, baseUrl, maxRetries: 2 });
    this.transport = new Transport({
      apiKey,
      baseUrl,
      maxRetries: 2,
      timeoutMs: 60_000,
      fetch: (input, init) => globalThis.fetch(input, init),
    });
  }

  listJobs(query: JobQuery = {}, signal?: AbortSignal): Promise<JobList> {
    return this.transport.json<JobList>({
      path: "/v1/jobs",
      query: {
        status: query.status,
        model: query.model,
        limit: query.limit ?? 50,
        cursor: query.cursor,
        ...metadataQuery(query.metadata),
      },
      signal,
    });
  }

  retry(id: string): Promise<Job> {
    return this.post<Job>(`/v1/jobs/${encodeURIComponent(id)}/retry`);
  }

  deliveries(id: string): Promise<WebhookDeliveryList> {
    return this.get<WebhookDeliveryList>(`/v1/jobs/${encodeURIComponent(id)}/webhooks`);
  }

  redeliver(jobId: string, deliveryId: string): Promise<unknown> {
    return this.post(
      `/v1/jobs/${encodeURIComponent(jobId)}/webhooks/${encodeURIComponent(deliveryId)}/redeliver`,
    );
  }

  get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return this.transport.json<T>({ path, signal });
  }

  post<T>(path: string, json: unknown = {}): Promise<T> {
    return this.transport.json<T>({ method: "POST", path, json });
  }

  /** Whether this key holds the `admin` scope: the admin API answers 403 otherwise. */
  async isAdmin(): Promise<boolean> {
    try {
      await this.get("/v1/admin/agents?limit=1");
      return true;
    } catch (error) {
      if (error instanceof APIError && error.status === 403) return false;
      throw error;
    }
  }

  /**
   * `GET /v1/events`: every change of this tenant's jobs, resumed after a drop from the
   * last event's id (`Last-Event-ID`), so the live views miss nothing and repeat nothing.
   */
  async *feed(signal: AbortSignal): AsyncGenerator<LiveEvent> {
    let lastEventId: string | undefined;
    while (!signal.aborted) {
      try {
        const response = await this.transport.call({
          path: "/v1/events",
          headers: {
            accept: "text/event-stream",
            ...(lastEventId ? { "last-event-id": lastEventId } : {}),
          },
          signal,
          stream: true,
        });
        if (!response.body) return;
        const reader = response.body
          .pipeThrough(new TextDecoderStream())
          .pipeThrough(new EventSourceParserStream())
          .getReader();
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            if (value.id) lastEventId = value.id;
            if (value.event === "status")
              yield { kind: "status", event: JSON.parse(value.data) as FeedEvent };
            else if (value.event === "progress")
              yield { kind: "progress", event: JSON.parse(value.data) as ProgressEvent };
          }
        } finally {
          await reader.cancel().catch(() => {});
        }
      } catch (error) {
        if (signal.aborted) return;
        // 410: the resume window is gone; start afresh (the views reload what they show). So
        // too for an id the gateway no longer opens (sealed before an upgrade or a new key).
        if (
          error instanceof APIError &&
          (error.status === 410 || error.code === "invalid_last_event_id")
        )
          lastEventId = undefined;
        else if (error instanceof APIError && error.status < 500 && error.status !== 429)
          throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}
