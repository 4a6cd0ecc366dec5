import { EventSourceParserStream } from "eventsource-parser/stream";
import type { FeedEvent, JobEvent, JobProgressEvent } from "../shared/protocol/index.ts";
import { APIError, ConnectionError, ResumeWindowError } from "./errors.ts";
import { backoffMs, metadataQuery, sleep, type Transport } from "./http.ts";
import type { JobStreamEvent } from "./types.ts";

const TERMINAL = new Set(["succeeded", "failed", "canceled", "expired"]);

export interface EventsOptions {
  /** Resume after this event id (the `seq` of the last event seen). */
  lastEventId?: string;
  signal?: AbortSignal;
}

/**
 * The job's event stream, ending after its last terminal status. A stream that drops (the
 * connection, or the gateway ending it after its time limit) is reopened with
 * `Last-Event-ID`, so no event is missed or repeated; `maxRetries` bounds reconnections
 * in a row that bring nothing new.
 */
export async function* jobEvents(
  transport: Transport,
  id: string,
  options: EventsOptions = {},
): AsyncGenerator<JobStreamEvent> {
  let lastEventId = options.lastEventId;
  let fruitless = 0;
  let ended = false;
  for (;;) {
    let progressed = false;
    try {
      const response = await transport.call({
        path: `/v1/jobs/${encodeURIComponent(id)}/events`,
        headers: {
          accept: "text/event-stream",
          ...(lastEventId ? { "last-event-id": lastEventId } : {}),
        },
        signal: options.signal,
        stream: true,
      });
      if (!response.body) throw new ConnectionError("the event stream has no body");
      const messages = response.body
        .pipeThrough(new TextDecoderStream())
        .pipeThrough(new EventSourceParserStream());
      for await (const message of iterate(messages)) {
        if (message.id) lastEventId = message.id;
        progressed = true;
        const event = toEvent(message);
        if (!event) continue;
        yield event;
        if (event.type === "status") ended = TERMINAL.has(event.data.status);
      }
      // The gateway closes the stream after the job's latest terminal event. A terminal
      // event followed by more (a failed job retried) does not end it: only the close does.
      if (ended) return;
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      // A body that breaks off mid-stream surfaces as a TypeError ("terminated"): reconnect.
      if (!(error instanceof ConnectionError) && !(error instanceof TypeError)) throw error;
      // Cut right after a terminal event: the job itself says whether anything followed.
      if (ended && (await finished(transport, id, options.signal))) return;
    }
    fruitless = progressed ? 0 : fruitless + 1;
    if (fruitless > transport.options.maxRetries)
      throw new ConnectionError(`the event stream of ${id} keeps dropping`);
    await sleep(progressed ? 0 : backoffMs(fruitless), options.signal);
  }
}

async function finished(transport: Transport, id: string, signal?: AbortSignal): Promise<boolean> {
  const job = await transport.json<{ status: string }>({
    path: `/v1/jobs/${encodeURIComponent(id)}`,
    signal,
  });
  return TERMINAL.has(job.status);
}

function toEvent(message: {
  id?: string | undefined;
  event?: string | undefined;
  data: string;
}): JobStreamEvent | undefined {
  const type = message.event ?? "message";
  if (type !== "status" && type !== "progress") return undefined; // newer event types
  const data: unknown = JSON.parse(message.data);
  return type === "status"
    ? { type, id: message.id, data: data as JobEvent }
    : { type, id: message.id, data: data as JobProgressEvent };
}

export interface TenantEventsOptions {
  /** Only these models / statuses / batches (`bat_…`). */
  model?: string | readonly string[];
  status?: string | readonly string[];
  batch?: string | readonly string[];
  /** Only jobs whose metadata has each of these (at most 4), as `GET /v1/jobs`. */
  metadata?: Record<string, string>;
  /** Resume after this event's `id` (a cursor of this stream, up to an hour old). */
  lastEventId?: string;
  signal?: AbortSignal;
  /**
   * Called each time a connection is open: from then on every change reaches this stream
   * (submit jobs after the first call to hear of all their changes).
   */
  onOpen?: () => void;
}

/** A change of one of the tenant's jobs; `id` is the cursor to resume after it. */
export type TenantStreamEvent =
  | { type: "status"; id: string; data: FeedEvent }
  | { type: "progress"; data: JobProgressEvent };

/**
 * `GET /v1/events`: every change of the tenant's jobs (those the filters keep), without end.
 * A dropped or ended connection is reopened with `Last-Event-ID` (backing off while it keeps
 * failing), so nothing is missed or repeated; `maxRetries` bounds failed reconnections in a
 * row. Past the resume window the gateway answers 410: that throws `ResumeWindowError` (read
 * the jobs' state, then start afresh without `lastEventId`). Ids are opaque and bound to the
 * tenant: a `lastEventId` the gateway did not send this tenant throws `APIError` 400
 * `invalid_last_event_id`. End it with the signal or by leaving the loop.
 */
export async function* tenantEvents(
  transport: Transport,
  options: TenantEventsOptions = {},
): AsyncGenerator<TenantStreamEvent> {
  const query: Record<string, string> = {};
  const join = (value: string | readonly string[] | undefined) =>
    typeof value === "string" ? value : value?.join(",");
  for (const name of ["model", "status", "batch"] as const) {
    const value = join(options[name]);
    if (value) query[name] = value;
  }
  Object.assign(query, metadataQuery(options.metadata));
  let lastEventId = options.lastEventId;
  let failures = 0;
  let retryMs = 0;
  for (;;) {
    let opened = false;
    let heard = false;
    const started = Date.now();
    try {
      const response = await transport.call({
        path: "/v1/events",
        query,
        headers: {
          accept: "text/event-stream",
          ...(lastEventId ? { "last-event-id": lastEventId } : {}),
        },
        signal: options.signal,
        stream: true,
      });
      if (!response.body) throw new ConnectionError("the event stream has no body");
      opened = true;
      failures = 0;
      options.onOpen?.();
      const messages = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(
        new EventSourceParserStream({
          onRetry: (ms) => {
            retryMs = ms;
          },
        }),
      );
      for await (const message of iterate(messages)) {
        heard = true;
        // Every event with an id moves the cursor, `ready` (the stream's start) included.
        if (message.id) lastEventId = message.id;
        if (message.event === "status" && message.id) {
          yield { type: "status", id: message.id, data: JSON.parse(message.data) as FeedEvent };
        } else if (message.event === "progress") {
          yield { type: "progress", data: JSON.parse(message.data) as JobProgressEvent };
        }
        // `error` (stream_overflow: this client fell behind) is followed by the close:
        // resuming is the cure. Other types are newer than this SDK.
      }
    } catch (error) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (error instanceof APIError && error.status === 410) throw new ResumeWindowError(error);
      if (!(error instanceof ConnectionError) && !(error instanceof TypeError)) throw error;
      if (!opened) failures++;
    }
    // A stream that ends at once with nothing said is a failure too (a proxy cutting it).
    if (opened && !heard && Date.now() - started < 1_000) failures++;
    // The gateway ends streams on its own (time limit, shutdown, overflow): reopen at once;
    // a connection that fails backs off.
    if (failures > transport.options.maxRetries)
      throw new ConnectionError("the event stream of GET /v1/events keeps failing");
    await sleep(failures ? Math.max(retryMs, backoffMs(failures)) : retryMs, options.signal);
  }
}

/** Web Streams' async iteration is missing in some browsers (Safari): read by hand there. */
async function* iterate<T>(stream: ReadableStream<T>): AsyncGenerator<T> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
