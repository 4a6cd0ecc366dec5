import type { IncomingMessage } from "node:http";
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { HttpProblem } from "../../shared/errors.ts";
import { JobStatus } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { type FeedFilter, Outbox } from "../feed/outbox.ts";
import { endOnShutdown } from "../feed/shutdown.ts";
import { type FeedCursor, parseCursor, type TenantEventRow } from "../store/tenant-events.ts";
import { metadataFilters } from "./jobs.ts";

/** Streams end after this long; clients reconnect with `Last-Event-ID` and miss nothing. */
const MAX_STREAM_MS = 15 * 60_000;
/** A comment this often keeps proxies from closing an idle stream. */
const HEARTBEAT_MS = 15_000;
const CATCH_UP_PAGE = 500;
/** How long an overflowed stream's socket may take to take its `error` event before it is cut. */
const OVERFLOW_GRACE_MS = 5_000;
const BATCH_ID = /^bat_[0-9a-z]{26}$/;

/** `GET /v1/events`: every change of the caller's jobs, resumable across gateways. */
export const eventRoutes = new Hono<AppEnv>().get("/", async (c) => {
  const gateway = c.var.gateway;
  const tenantId = c.var.tenant.id;
  const filter = parseFilter(new URL(c.req.url).searchParams, c.req.query());
  const resume = c.req.header("last-event-id") ?? c.req.query("last_event_id");
  const resumeFrom = resume ? checkResume(gateway, resume) : null;
  const feed = gateway.feed;
  if (feed.openStreams(tenantId) >= gateway.config.maxEventStreamsPerTenant) {
    throw new HttpProblem(
      429,
      "too_many_streams",
      "Too many open event streams",
      `At most ${gateway.config.maxEventStreamsPerTenant} streams per tenant; close one, or filter one stream instead of opening several.`,
    );
  }
  if (resumeFrom) feed.stats.resumes++;
  // Joined before the response starts, so a stream without Last-Event-ID holds every change
  // committed after its response began.
  let caughtUp = false;
  let outbox: Outbox | null = null;
  const live: TenantEventRow[] = [];
  const joined = await feed.join(
    tenantId,
    (rows) => {
      if (caughtUp && outbox) outbox.push(rows);
      else live.push(...rows);
    },
    // Latest only: progress announced while the stream catches up is not kept for it.
    (progress) => {
      if (caughtUp && outbox) outbox.pushProgress(progress);
    },
  );
  feed.stats.openStreams++;

  return streamSSE(c, async (stream) => {
    const closed = new AbortController();
    stream.onAbort(() => closed.abort());
    const stopping = endOnShutdown(gateway, stream, closed);
    outbox = new Outbox(stream, filter, closed, gateway.config.eventsStreamBuffer);
    const heartbeat = setInterval(() => void stream.write(": keep-alive\n\n"), HEARTBEAT_MS);
    try {
      // Read from our own cursor until we pass the live feed's (a short page means we have
      // everything committed so far), then take the live rows we do not already have.
      if (resumeFrom) {
        let cursor: FeedCursor = resumeFrom;
        for (;;) {
          const rows = await feed.events.after(tenantId, cursor, CATCH_UP_PAGE);
          outbox.push(rows);
          // Written page by page: a long catch-up is not a slow client.
          await outbox.flush();
          cursor = rows.at(-1)?.cursor ?? cursor;
          if (rows.length < CATCH_UP_PAGE || closed.signal.aborted) break;
        }
        outbox.skipUntil(cursor);
      } else {
        outbox.skipUntil(joined.from);
        // The stream's starting cursor, so a client cut before its first change resumes
        // from here and misses nothing (an `id` alone is not dispatched by EventSource
        // parsers, hence the empty event).
        await stream.writeSSE({ event: "ready", id: joined.from, data: "{}" });
      }
      caughtUp = true;
      outbox.push(live.splice(0));
      await outbox.run(gateway.now() + MAX_STREAM_MS, gateway.now);
      if (outbox.overflowed) {
        // Counted when dropped, not once the client has taken the notice (or was cut).
        feed.stats.dropped++;
        await endOverflowed(outbox, c.env);
      }
      await stopping.hint();
    } finally {
      clearInterval(heartbeat);
      joined.leave();
      feed.stats.openStreams--;
      feed.stats.eventsSent += outbox.sent;
    }
  });
});

/**
 * A client that stopped reading holds the writes already queued for its socket: give it a
 * while to take them and the `error` event, then cut the connection (Node), so a stalled
 * client costs a bounded buffer for a bounded time.
 */
async function endOverflowed(outbox: Outbox, env: unknown): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const taken = await Promise.race([
    outbox.overflowNotice().then(() => true),
    new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), OVERFLOW_GRACE_MS);
    }),
  ]);
  clearTimeout(timer);
  if (!taken) (env as { incoming?: IncomingMessage } | undefined)?.incoming?.socket?.destroy();
}

function parseFilter(params: URLSearchParams, query: Record<string, string>): FeedFilter {
  const list = (name: string) => {
    const values = params
      .getAll(name)
      .flatMap((v) => v.split(","))
      .filter(Boolean);
    return values.length ? new Set(values) : null;
  };
  const statuses = list("status");
  for (const status of statuses ?? []) {
    if (!JobStatus.safeParse(status).success) {
      throw new HttpProblem(
        422,
        "invalid_filter",
        "Invalid filter",
        `status ${JSON.stringify(status)} is not one of ${JobStatus.options.join(", ")}.`,
      );
    }
  }
  const batches = list("batch");
  for (const batch of batches ?? []) {
    if (!BATCH_ID.test(batch)) {
      throw new HttpProblem(
        422,
        "invalid_filter",
        "Invalid filter",
        `batch ${JSON.stringify(batch)} is not a batch id (bat_…).`,
      );
    }
  }
  return { models: list("model"), statuses, batches, metadata: metadataFilters(query) };
}

function checkResume(gateway: Gateway, resume: string): FeedCursor {
  const parsed = parseCursor(resume);
  if (!parsed) {
    throw new HttpProblem(
      400,
      "invalid_last_event_id",
      "Invalid Last-Event-ID",
      "Last-Event-ID must be the id of an event this endpoint sent; open the stream without it to start from now.",
    );
  }
  const windowMs = gateway.config.eventsResumeWindowSeconds * 1000;
  if (gateway.now() - parsed.at > windowMs) {
    throw new HttpProblem(
      410,
      "resume_window_exceeded",
      "Too far back to resume",
      `A stream resumes at most ${gateway.config.eventsResumeWindowSeconds} s back. Read the jobs' state with GET /v1/jobs, then open GET /v1/events without Last-Event-ID.`,
      { resume_window_seconds: gateway.config.eventsResumeWindowSeconds },
    );
  }
  return resume;
}
