import { createRoute, OpenAPIHono } from "@hono/zod-openapi";
import { streamSSE } from "hono/streaming";
import { HttpProblem } from "../../shared/errors.ts";
import { pause } from "../../shared/pause.ts";
import { isTerminal, type JobProgressEvent, type JobStatus } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { AppEnv } from "../env.ts";
import { holdJobStream } from "../feed/job-streams.ts";
import { streamLife } from "../feed/stream-life.ts";
import { keyCheck } from "../http/auth.ts";
import { streamHead } from "../http/sse-head.ts";
import { queuedAhead } from "../jobs/queue-position.ts";
import { tenantJob } from "../jobs/tenant-job.ts";
import { waitingOf } from "../jobs/waiting.ts";
import { isLater } from "../notifier.ts";
import { documented, JobIdParams, problems, ref } from "../openapi/parts.ts";
import { parseStoredProgress, toProgressEvent } from "../store/job-progress.ts";
import { type JobRow, toJobEvent } from "../store/job-rows.ts";

/** Streams end after this long; clients reconnect with `Last-Event-ID` and miss nothing. */
const MAX_STREAM_MS = 5 * 60_000;

const eventsRoute = createRoute({
  method: "get",
  path: "/{id}/events",
  operationId: "streamJobEvents",
  summary: "Follow a job's state changes and progress (server-sent events)",
  description:
    "One `status` event (JobEvent) per change, each with `id` = its sequence number; the stream closes after a terminal state, at once when resumed after it. Reconnect with `Last-Event-ID` to resume (one of these ids, else `400 invalid_last_event_id`). While the job runs, `progress` events (JobProgressEvent) come beside them when its model reports progress, always before the end: latest only (reports are paced, a few per second at most), without an `id`, so they are not replayed on a resume; a (re)connected stream first gets the running job's latest one. A stream whose API key is revoked meanwhile ends within about a second with an `error` event (`key_revoked`). A tenant may hold 1 000 such streams per gateway (`429 too_many_streams`): to follow many jobs, use one `GET /v1/events` stream.",
  request: { params: JobIdParams },
  responses: {
    200: {
      description: "An event stream of JobEvent (`status`) and JobProgressEvent (`progress`)",
      content: {
        "text/event-stream": {
          schema: { oneOf: [ref("JobEvent"), ref("JobProgressEvent")] },
          example:
            'id: 2\nevent: status\ndata: {"job_id":"job_01j9zq7c7v4d0m3y7p7c2n2x3e","seq":2,"status":"running","at":"2026-12-01T22:01:57.101Z","attempt":1,"error":null}\n\nevent: progress\ndata: {"job_id":"job_01j9zq7c7v4d0m3y7p7c2n2x3e","attempt":1,"fraction":0.6,"stage":"recognition","message":"3 of 6 lines","updated_at":"2026-12-01T22:01:57.480Z"}\n\n',
        },
      },
    },
    ...problems(400, 401, 404, 429),
  },
});

export const jobEventRoutes = documented(new OpenAPIHono<AppEnv>(), eventsRoute).get(
  eventsRoute.getRoutingPath(),
  async (c) => {
    const gateway = c.get("gateway");
    const id = c.req.param("id");
    const job = await tenantJob(gateway, c.get("tenant").id, id);
    let seq = resumeAfter(c.req.header("last-event-id"), job);
    const head = streamHead(c);
    if (head) return head;
    const release = holdJobStream(gateway, c.get("tenant").id);
    // Resumed after the job's latest event, a terminal one: the client has it all. Without
    // this the stream sent nothing and stayed open (an EventSource reconnects when the
    // server closes after the terminal event, and then hung until the deadline).
    const complete = isTerminal(job.status as JobStatus) && seq === job.last_seq;
    // The attempt whose progress may be sent: the one running as of the last status event
    // written (none before the stream has caught up with the job's history).
    let running = job.status === "running" && seq >= job.last_seq ? job.attempt : null;
    let sent: string | null = null;
    let stored: JobProgressEvent | undefined = progressOf(job);

    return streamSSE(c, async (stream) => {
      const life = streamLife(gateway, stream, keyCheck(c));
      const closed = life.closed;
      const deadline =
        gateway.now() + Math.min(MAX_STREAM_MS, gateway.config.maxStreamSeconds * 1000);
      // Progress carries no SSE id: it is latest-only, and Last-Event-ID stays the last
      // status event's. Sent only for the attempt running, always before what follows it.
      const sendProgress = async () => {
        const latest = newer(gateway.notifier.latestProgress(id), stored);
        if (!latest || latest.attempt !== running) return;
        const key = `${latest.attempt} ${latest.updated_at} ${latest.fraction} ${latest.stage}`;
        if (key === sent) return;
        sent = key;
        const { model: _model, ...event } = latest;
        await stream.writeSSE({ event: "progress", data: JSON.stringify(event) });
      };
      try {
        while (!complete && !closed.signal.aborted && gateway.now() < deadline) {
          // Another gateway may change the job: unless the change feed brings every gateway's
          // changes, poll the store as well.
          const live = gateway.notifier.live;
          // No wait past the stream's end.
          const pollMs = Math.max(
            0,
            Math.min(
              live ? gateway.config.feedSafetyPollMs : gateway.config.feedPollMs,
              deadline - gateway.now(),
            ),
          );
          // Workers: a wake from the request that changed the job would settle this request's
          // promise from another's context, which workerd refuses (and, this stream ended, left
          // its listener behind): there it re-reads on a timer of its own, as jobs/wait.ts does.
          const wake = gateway.isolatedRequests
            ? pause(pollMs, closed.signal)
            : gateway.notifier.next(id, pollMs, closed.signal);
          const rows = await gateway.stores.jobs.eventsAfter(id, seq);
          if (!live && running !== null) {
            // No feed brings progress here: read it with the events.
            const row = await gateway.stores.jobs.forTenant(c.get("tenant").id, id);
            stored = row ? progressOf(row) : stored;
          }
          await sendProgress();
          for (const row of rows) {
            seq = row.seq;
            running = row.status === "running" ? row.attempt : null;
            // Back in line since the job was read (a retry): what was read is an earlier life's.
            if (row.status === "queued" && row.seq > job.last_seq) stored = undefined;
            // The job's latest event, queued: why it waits, as GET /v1/jobs/{id} says it.
            const waiting =
              row.status === "queued" && row === rows.at(-1) ? await waitingNow(gateway, id) : {};
            await stream.writeSSE({
              id: String(row.seq),
              event: "status",
              data: JSON.stringify({ ...toJobEvent(row), ...waiting }),
            });
          }
          // Only the latest event ends the stream: a retried job's history holds a terminal
          // state followed by its next life.
          const last = rows.at(-1);
          if (last && isTerminal(last.status as JobStatus)) return;
          await sendProgress();
          await wake;
        }
        await life.sayWhy();
      } finally {
        // Also ends the wake still pending after the terminal event: left, it held the
        // stream's listener on the notifier (and its timer) for the rest of its poll, 30 s with
        // a live feed, so a Postgres gateway following 100 jobs a second kept 3 000 of them.
        life.end();
        release();
      }
    });
  },
);

/**
 * The sequence a resume starts after: `Last-Event-ID` is one of the `id`s this stream sends,
 * a sequence number of the job's events; anything else (not a number, past the job's latest
 * event) is a mistake said as such rather than a silent replay from the start, or a stream
 * that waits for an event that never comes.
 */
function resumeAfter(header: string | undefined, job: JobRow): number {
  if (header === undefined || header.trim() === "") return 0;
  const value = /^\d{1,15}$/.test(header.trim()) ? Number(header.trim()) : Number.NaN;
  if (value <= job.last_seq) return value;
  throw new HttpProblem(
    400,
    "invalid_last_event_id",
    "Invalid Last-Event-ID",
    `Last-Event-ID must be the id of one of this job's events, a sequence number from 1 to ${job.last_seq}; open the stream without it to start from the first.`,
  );
}

/** A queued job's `waiting_reason` and `waiting_detail` now; nothing once it moved on. */
async function waitingNow(gateway: Gateway, id: string) {
  const row = await gateway.stores.jobs.byId(id);
  if (row?.status !== "queued") return {};
  return waitingOf(gateway, row, await queuedAhead(gateway, row));
}

function progressOf(row: JobRow): JobProgressEvent | undefined {
  const stored = parseStoredProgress(row.progress);
  return stored ? toProgressEvent(row.id, stored) : undefined;
}

/** The later of two reports (by attempt, then time), either possibly missing. */
function newer(
  a: JobProgressEvent | undefined,
  b: JobProgressEvent | undefined,
): JobProgressEvent | undefined {
  if (!a || !b) return a ?? b;
  return isLater(b, a) ? b : a;
}
