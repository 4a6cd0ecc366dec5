import { Hono } from "hono";
import { type SSEStreamingApi, streamSSE } from "hono/streaming";
import { HttpProblem } from "../../shared/errors.ts";
import { type FeedEvent, JobStatus } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { endOnShutdown } from "../feed/shutdown.ts";
import {
  compareCursors,
  type FeedCursor,
  parseCursor,
  type TenantEventRow,
} from "../store/tenant-events.ts";

/** Streams end after this long; clients reconnect with `Last-Event-ID` and miss nothing. */
const MAX_STREAM_MS = 15 * 60_000;
/** A comment this often keeps proxies from closing an idle stream. */
const HEARTBEAT_MS = 15_000;
/** Events waiting for a slow client; past this the stream is closed and must resume. */
const MAX_BUFFERED = 1_000;
const CATCH_UP_PAGE = 500;

interface Filter {
  models: Set<string> | null;
  statuses: Set<string> | null;
}

/** `GET /v1/events`: every change of the caller's jobs, resumable across gateways. */
export const eventRoutes = new Hono<AppEnv>().get("/", async (c) => {
  const gateway = c.var.gateway;
  const tenantId = c.var.tenant.id;
  const filter = parseFilter(new URL(c.req.url).searchParams);
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
  const joined = await feed.join(tenantId, (rows) => {
    if (caughtUp && outbox) outbox.push(rows);
    else live.push(...rows);
  });
  feed.stats.openStreams++;

  return streamSSE(c, async (stream) => {
    const closed = new AbortController();
    stream.onAbort(() => closed.abort());
    const stopping = endOnShutdown(gateway, stream, closed);
    outbox = new Outbox(stream, filter, closed);
    const heartbeat = setInterval(() => void stream.write(": keep-alive\n\n"), HEARTBEAT_MS);
    try {
      // Read from our own cursor until we pass the live feed's (a short page means we have
      // everything committed so far), then take the live rows we do not already have.
      if (resumeFrom) {
        let cursor: FeedCursor = resumeFrom;
        for (;;) {
          const rows = await feed.events.after(tenantId, cursor, CATCH_UP_PAGE);
          outbox.push(rows);
          cursor = rows.at(-1)?.cursor ?? cursor;
          if (rows.length < CATCH_UP_PAGE) break;
        }
        outbox.skipUntil(cursor);
      } else {
        outbox.skipUntil(joined.from);
      }
      caughtUp = true;
      outbox.push(live.splice(0));
      await outbox.run(gateway.now() + MAX_STREAM_MS, gateway.now);
      await stopping.hint();
    } finally {
      clearInterval(heartbeat);
      joined.leave();
      feed.stats.openStreams--;
      feed.stats.eventsSent += outbox.sent;
      if (outbox.overflowed) feed.stats.dropped++;
    }
  });
});

/** The events one stream still has to write, in order, bounded. */
class Outbox {
  private readonly queue: TenantEventRow[] = [];
  private last: FeedCursor | null = null;
  private wake: (() => void) | null = null;
  sent = 0;
  overflowed = false;

  constructor(
    private readonly stream: SSEStreamingApi,
    private readonly filter: Filter,
    private readonly closed: AbortController,
  ) {
    closed.signal.addEventListener("abort", () => this.wake?.());
  }

  skipUntil(cursor: FeedCursor): void {
    if (this.last === null || compareCursors(cursor, this.last) > 0) this.last = cursor;
  }

  push(rows: readonly TenantEventRow[]): void {
    for (const row of rows) {
      if (this.last !== null && compareCursors(row.cursor, this.last) <= 0) continue;
      this.last = row.cursor;
      if (matches(this.filter, row)) this.queue.push(row);
    }
    if (this.queue.length > MAX_BUFFERED) {
      this.overflowed = true;
      this.closed.abort();
    }
    this.wake?.();
  }

  async run(deadline: number, now: () => number): Promise<void> {
    while (!this.closed.signal.aborted && now() < deadline) {
      const row = this.queue.shift();
      if (!row) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.max(0, deadline - now()));
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = null;
        continue;
      }
      await this.stream.writeSSE({ id: row.cursor, event: "status", data: toFeedEvent(row) });
      this.sent++;
    }
    if (this.overflowed) {
      // Said plainly, so a client knows to resume rather than give up.
      await this.stream
        .writeSSE({
          event: "error",
          data: JSON.stringify({
            code: "stream_overflow",
            message: `This stream fell ${MAX_BUFFERED} events behind; reconnect with Last-Event-ID to resume.`,
          }),
        })
        .catch(() => {});
    }
  }
}

function toFeedEvent(row: TenantEventRow): string {
  const event: FeedEvent = {
    job_id: row.job_id,
    seq: row.seq,
    status: row.status as JobStatus,
    at: new Date(row.at).toISOString(),
    attempt: row.attempt,
    error: row.error ? JSON.parse(row.error) : null,
    model: row.model,
  };
  return JSON.stringify(event);
}

function matches(filter: Filter, row: TenantEventRow): boolean {
  if (filter.models && !filter.models.has(row.model)) return false;
  if (filter.statuses && !filter.statuses.has(row.status)) return false;
  return true;
}

function parseFilter(params: URLSearchParams): Filter {
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
  return { models: list("model"), statuses };
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
