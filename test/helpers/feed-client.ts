import { readSse } from "./sse.ts";

export interface StreamedEvent {
  id: string;
  event: string;
  job_id: string;
  seq: number;
  status: string;
  model: string;
}

/**
 * Opens `GET /v1/events` (resuming from `lastEventId` when given) and collects its events
 * until `until` says enough, then drops the connection as a client would.
 */
export async function collectFeed(
  api: (path: string, init?: RequestInit) => Promise<Response>,
  until: (events: readonly StreamedEvent[]) => boolean,
  options: { lastEventId?: string; query?: string; onOpen?: () => void | Promise<void> } = {},
): Promise<StreamedEvent[]> {
  const abort = new AbortController();
  const headers: Record<string, string> = options.lastEventId
    ? { "last-event-id": options.lastEventId }
    : {};
  const response = await api(`/v1/events${options.query ?? ""}`, {
    headers,
    signal: abort.signal,
  });
  if (response.status !== 200) {
    throw new Error(`events: ${response.status} ${await response.text()}`);
  }
  const events: StreamedEvent[] = [];
  await options.onOpen?.();
  try {
    await readSse(response, ({ id, event, data }) => {
      if (event !== "status") return;
      events.push({ id, event, ...(JSON.parse(data) as Omit<StreamedEvent, "id" | "event">) });
      if (until(events)) abort.abort();
    });
  } catch (error) {
    if (!abort.signal.aborted) throw error;
  }
  return events;
}

/** Each job's statuses in the order the stream gave them. */
export function statusesByJob(events: readonly StreamedEvent[]): Map<string, string[]> {
  const byJob = new Map<string, string[]>();
  for (const event of events) {
    const list = byJob.get(event.job_id) ?? [];
    list.push(event.status);
    byJob.set(event.job_id, list);
  }
  return byJob;
}
