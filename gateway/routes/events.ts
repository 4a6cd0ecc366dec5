import type { IncomingMessage } from "node:http";
import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import { streamSSE } from "hono/streaming";
import { HttpProblem } from "../../shared/errors.ts";
import { JobStatus } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { feedWaiting } from "../feed/feed-waiting.ts";
import { type FeedFilter, Outbox } from "../feed/outbox.ts";
import { streamLife } from "../feed/stream-life.ts";
import { keyCheck } from "../http/auth.ts";
import { streamHead } from "../http/sse-head.ts";
import { refuseUnknownParameters } from "../http/validation.ts";
import { documented, problems, ref } from "../openapi/parts.ts";
import { type FeedCursor, parseCursor, type TenantEventRow } from "../store/tenant-events.ts";
import { METADATA_FILTER, metadataFilters } from "./jobs.ts";

/** A comment this often keeps proxies from closing an idle stream. */
const HEARTBEAT_MS = 15_000;
const CATCH_UP_PAGE = 500;
/** How long an overflowed stream's socket may take to take its `error` event before it is cut. */
const OVERFLOW_GRACE_MS = 5_000;
const BATCH_ID = /^bat_[0-9a-z]{26}$/;

/** `GET /v1/events`: every change of the caller's jobs, resumable across gateways. */
const list = (name: string, description: string) => ({
  name,
  in: "query" as const,
  required: false,
  description,
  schema: { type: "string" as const },
});

const feedRoute = createRoute({
  method: "get",
  path: "/",
  operationId: "streamEvents",
  summary: "Follow every change of your jobs (server-sent events)",
  description: [
    "One `status` event per state change of any of your jobs, in commit order, from every gateway.",
    "Beside them, `progress` events (JobProgressEvent, with `model`) carry a running job's latest progress as its model reports it: latest only, without an `id`, so they neither move the cursor nor are replayed on a resume (read `GET /v1/jobs/{id}` for the latest). `batch` and `metadata` filters keep the progress of jobs whose status events this stream kept; a `status` filter keeps progress only if it keeps `running`.",
    "A stream opened without `Last-Event-ID` starts with `event: ready` (`data: {}`) whose `id` is its starting cursor. Each event's `id` is a cursor: reconnect with `Last-Event-ID` (or `?last_event_id=`) to resume with nothing missed and nothing repeated, on any gateway, up to `eventsResumeWindowSeconds` (1 h) back; older answers `410 resume_window_exceeded`.",
    "Ids are opaque and sealed for your tenant (authenticated encryption under a key all the deployment's gateways share): each is different, even for one position, and tells nothing of other tenants' work. An id that was altered, made up, or sent to another tenant answers `400 invalid_last_event_id` (open the stream without it to start from now).",
    "Filters apply to each event and leave the cursor exact: a resume from a filtered stream's last `id` gets the next matching event, none repeated. A `: keep-alive` comment every 15 s keeps proxies from closing an idle stream; streams end after 15 min, 4 on Workers (resume). A client that stops reading with more than 1 000 events waiting (`eventsStreamBuffer`) for 1 s, or falls 10 000 behind, gets an `error` event (`stream_overflow`) and the stream closes (cut 5 s later if it still reads nothing): resume.",
    "A stream whose API key is revoked meanwhile ends within about a second with an `error` event (`key_revoked`).",
    "At most 100 streams per tenant per gateway (`429 too_many_streams`).",
  ].join(" "),
  parameters: [
    list("model", "Only these models (comma-separated or repeated)."),
    list("status", "Only these statuses (comma-separated or repeated)."),
    list("batch", "Only the jobs of these batches (`bat_…`, comma-separated or repeated)."),
    {
      name: "metadata.KEY",
      in: "query" as const,
      required: false,
      description:
        "Only jobs whose metadata has KEY equal to this value (`?metadata.customer=acme`); up to 4, all must match. As on `GET /v1/jobs`.",
      schema: { type: "string" as const },
    },
    {
      name: "Last-Event-ID",
      in: "header" as const,
      required: false,
      description:
        "The `id` of the last event received: resume after it. Only ids this API sent to your tenant open (else `400 invalid_last_event_id`).",
      schema: { type: "string" as const },
    },
  ],
  responses: {
    "200": {
      description: "An event stream of FeedEvent (`status`) and JobProgressEvent (`progress`)",
      content: {
        "text/event-stream": {
          schema: { oneOf: [ref("FeedEvent"), ref("JobProgressEvent")] },
          example:
            'event: progress\ndata: {"job_id":"job_01j9zq7c7v4d0m3y7p7c2n2x3e","attempt":1,"fraction":0.6,"stage":"recognition","message":"3 of 6 lines","updated_at":"2026-12-01T22:01:58.100Z","model":"ocr"}\n\nid: e1.Xq3vN0k8b1Qm9r2T0yJc4e7LZ8w6pH5sDfGhJkLmNoPqRsTuVwXyZaBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgHiJkLm\nevent: status\ndata: {"job_id":"job_01j9zq7c7v4d0m3y7p7c2n2x3e","seq":3,"status":"succeeded","at":"2026-12-01T22:01:58.532Z","attempt":1,"error":null,"model":"ocr"}\n\n',
        },
      },
    },
    ...problems(400, 401, 403, 410, 422, 429),
  },
});

export const eventRoutes = documented(new OpenAPIHono<AppEnv>(), feedRoute).get(
  feedRoute.getRoutingPath(),
  async (c) => {
    const gateway = c.get("gateway");
    const tenantId = c.get("tenant").id;
    const filter = parseFilter(new URL(c.req.url).searchParams, c.req.query());
    const resume = c.req.header("last-event-id") ?? c.req.query("last_event_id");
    const resumeFrom = resume ? await checkResume(gateway, tenantId, resume) : null;
    const feed = gateway.feed;
    if (feed.openStreams(tenantId) >= gateway.config.maxEventStreamsPerTenant) {
      throw new HttpProblem(
        429,
        "too_many_streams",
        "Too many open event streams",
        `At most ${gateway.config.maxEventStreamsPerTenant} streams per tenant; close one, or filter one stream instead of opening several.`,
      );
    }
    const head = streamHead(c);
    if (head) return head;
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
      const life = streamLife(gateway, stream, keyCheck(c));
      const closed = life.closed;
      outbox = new Outbox(
        stream,
        filter,
        closed,
        gateway.config.eventsStreamBuffer,
        (row) => gateway.feedCursors.idOf(tenantId, row),
        Date.now,
        (row) => feedWaiting(gateway, tenantId, row),
      );
      const heartbeat = setInterval(() => void stream.write(": keep-alive\n\n"), HEARTBEAT_MS);
      try {
        // Read from our own cursor until we pass the live feed's (a short page means we have
        // everything committed so far), then take the live rows we do not already have.
        if (resumeFrom) {
          let cursor: FeedCursor = resumeFrom;
          for (;;) {
            const rows = await feed.events.after(tenantId, cursor, CATCH_UP_PAGE);
            outbox.push(rows, { history: true });
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
          const id = await gateway.feedCursors.seal(tenantId, joined.from);
          await stream.writeSSE({ event: "ready", id, data: "{}" });
        }
        caughtUp = true;
        outbox.push(live.splice(0));
        await outbox.run(gateway.now() + gateway.config.maxStreamSeconds * 1000, gateway.now);
        if (outbox.overflowed) {
          // Counted when dropped, not once the client has taken the notice (or was cut).
          feed.stats.dropped++;
          await endOverflowed(outbox, c.env);
        }
        await life.sayWhy();
      } finally {
        life.end();
        clearInterval(heartbeat);
        joined.leave();
        feed.stats.openStreams--;
        feed.stats.eventsSent += outbox.sent;
      }
    });
  },
);

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
  // `last_event_id`: the resume cursor of a client that cannot send `Last-Event-ID`.
  refuseUnknownParameters(query, ["model", "status", "batch", "last_event_id"], [METADATA_FILTER]);
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

/**
 * The cursor inside a `Last-Event-ID`: one this deployment sealed for this tenant
 * (feed/cursor-token.ts), whose time (the row's own, or the stream's start, as the gateway
 * wrote it) is within the resume window. Anything else is refused before a row is read.
 */
async function checkResume(
  gateway: Gateway,
  tenantId: string,
  resume: string,
): Promise<FeedCursor> {
  const cursor = await gateway.feedCursors.open(tenantId, resume);
  const parsed = cursor === null ? null : parseCursor(cursor);
  if (cursor === null || !parsed) {
    throw new HttpProblem(
      400,
      "invalid_last_event_id",
      "Invalid Last-Event-ID",
      "Last-Event-ID must be the id of an event this API sent to this tenant (ids are opaque and bound to the tenant whose key opened the stream); open the stream without it to start from now.",
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
  return cursor;
}
