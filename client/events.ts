import { EventSourceParserStream } from "eventsource-parser/stream";
import type { JobEvent } from "../shared/protocol/index.ts";
import { ConnectionError } from "./errors.ts";
import { backoffMs, sleep, type Transport } from "./http.ts";
import type { JobStreamEvent, JobUpdate } from "./types.ts";

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
    : { type, id: message.id, data: data as JobUpdate };
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
