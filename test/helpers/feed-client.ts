import { afterAll, beforeAll } from "vitest";
import type { Gateway } from "../../gateway/context.ts";
import { compareCursors } from "../../gateway/store/tenant-events.ts";
import type { AgentHandle } from "../../gpu-agent/agent.ts";
import { readSse } from "./sse.ts";
import { startTestAgent } from "./test-agent.ts";
import { startTestGateway, type TestGateway } from "./test-gateway.ts";

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

/**
 * The store cursors inside ids `GET /v1/events` sent to `tenantId` (null for one that does
 * not open): ids are sealed afresh each time they are sent (gateway/feed/cursor-token.ts),
 * so two streams' ids for one event differ, and their cursors are what to compare.
 */
export function cursorsOf(
  gateway: Pick<Gateway, "feedCursors">,
  ids: readonly string[],
  tenantId = "ten_test",
): Promise<(string | null)[]> {
  return Promise.all(ids.map((id) => gateway.feedCursors.open(tenantId, id)));
}

/**
 * Whether `ids` (sent by `GET /v1/events` to `tenantId`) are in strictly increasing store
 * order. Ids are sealed (gateway/feed/cursor-token.ts), so the gateway opens them; one that
 * does not open counts as out of order.
 */
export async function inCursorOrder(
  gateway: Pick<Gateway, "feedCursors">,
  ids: readonly string[],
  tenantId = "ten_test",
): Promise<boolean> {
  const cursors = await cursorsOf(gateway, ids, tenantId);
  return cursors.every(
    (cursor, i) => cursor !== null && (i === 0 || compareCursors(cursors[i - 1] ?? "", cursor) < 0),
  );
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

/** Polling so slow that only the change feed can bring news within a test's time. */
export const NO_POLLING = { feedPollMs: 600_000, feedSafetyPollMs: 600_000 };

/**
 * Two gateways on one Postgres database, with `NO_POLLING`, and one noop agent that reports
 * to B only: A hears of its work through the change feed alone. Registers its own
 * `beforeAll`/`afterAll` in the calling `describe`; `changeFeed` as `startTestGateway`'s.
 * `bApi` calls B with A's key (valid on B: one database).
 */
export function twoGatewaysOnPostgres(changeFeed?: `redis://${string}`) {
  const pair = {} as { a: TestGateway; b: TestGateway; agent: AgentHandle };
  const options = {
    models: ["noop"],
    config: NO_POLLING,
    ...(changeFeed ? { changeFeed } : {}),
  };
  beforeAll(async () => {
    pair.a = await startTestGateway({ database: "postgres", ...options });
    pair.b = await startTestGateway({ database: { url: pair.a.databaseUrl }, ...options });
    pair.agent = await startTestAgent(pair.b, { models: ["noop"] });
  });
  afterAll(async () => {
    await pair.agent?.stop();
    await pair.b?.close();
    await pair.a?.close();
  });
  const bApi: TestGateway["api"] = (path, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${pair.a.apiKey}`);
    return pair.b.api(path, { ...init, headers });
  };
  return { pair, bApi };
}
