import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { notFound } from "../../shared/errors.ts";
import { isTerminal, type JobProgressEvent, type JobStatus } from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { endOnShutdown } from "../feed/shutdown.ts";
import { isLater } from "../notifier.ts";
import { parseStoredProgress, toProgressEvent } from "../store/job-progress.ts";
import { type JobRow, toJobEvent } from "../store/job-rows.ts";

/** Streams end after this long; clients reconnect with `Last-Event-ID` and miss nothing. */
const MAX_STREAM_MS = 5 * 60_000;

export const jobEventRoutes = new Hono<AppEnv>().get("/:id/events", async (c) => {
  const gateway = c.var.gateway;
  const id = c.req.param("id");
  const job = await gateway.stores.jobs.forTenant(c.var.tenant.id, id);
  if (!job) throw notFound("Job", id);
  const lastEventId = Number.parseInt(c.req.header("last-event-id") ?? "0", 10);
  let seq = Number.isSafeInteger(lastEventId) && lastEventId > 0 ? lastEventId : 0;
  // The attempt whose progress may be sent: the one running as of the last status event
  // written (none before the stream has caught up with the job's history).
  let running = job.status === "running" && seq >= job.last_seq ? job.attempt : null;
  let sent: string | null = null;
  let stored: JobProgressEvent | undefined = progressOf(job);

  return streamSSE(c, async (stream) => {
    const closed = new AbortController();
    stream.onAbort(() => closed.abort());
    const stopping = endOnShutdown(gateway, stream, closed);
    const deadline = gateway.now() + MAX_STREAM_MS;
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
    while (!closed.signal.aborted && gateway.now() < deadline) {
      // Another gateway may change the job: unless the change feed brings every gateway's
      // changes, poll the store as well.
      const live = gateway.notifier.live;
      const pollMs = live ? gateway.config.feedSafetyPollMs : gateway.config.feedPollMs;
      const wake = gateway.notifier.next(id, pollMs, closed.signal);
      const rows = await gateway.stores.jobs.eventsAfter(id, seq);
      if (!live && running !== null) {
        // No feed brings progress here: read it with the events.
        const row = await gateway.stores.jobs.forTenant(c.var.tenant.id, id);
        stored = row ? progressOf(row) : stored;
      }
      await sendProgress();
      for (const row of rows) {
        seq = row.seq;
        running = row.status === "running" ? row.attempt : null;
        // Back in line since the job was read (a retry): what was read is an earlier life's.
        if (row.status === "queued" && row.seq > job.last_seq) stored = undefined;
        await stream.writeSSE({
          id: String(row.seq),
          event: "status",
          data: JSON.stringify(toJobEvent(row)),
        });
      }
      // Only the latest event ends the stream: a retried job's history holds a terminal
      // state followed by its next life.
      const last = rows.at(-1);
      if (last && isTerminal(last.status as JobStatus)) return;
      await sendProgress();
      await wake;
    }
    await stopping.hint();
  });
});

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
