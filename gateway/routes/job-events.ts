import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { notFound } from "../../shared/errors.ts";
import { isTerminal, type JobStatus } from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { endOnShutdown } from "../feed/shutdown.ts";
import { toJobEvent } from "../store/job-rows.ts";

/** Streams end after this long; clients reconnect with `Last-Event-ID` and miss nothing. */
const MAX_STREAM_MS = 5 * 60_000;

export const jobEventRoutes = new Hono<AppEnv>().get("/:id/events", async (c) => {
  const gateway = c.var.gateway;
  const id = c.req.param("id");
  const job = await gateway.stores.jobs.forTenant(c.var.tenant.id, id);
  if (!job) throw notFound("Job", id);
  const lastEventId = Number.parseInt(c.req.header("last-event-id") ?? "0", 10);
  let seq = Number.isSafeInteger(lastEventId) && lastEventId > 0 ? lastEventId : 0;

  return streamSSE(c, async (stream) => {
    const closed = new AbortController();
    stream.onAbort(() => closed.abort());
    const stopping = endOnShutdown(gateway, stream, closed);
    const deadline = gateway.now() + MAX_STREAM_MS;
    while (!closed.signal.aborted && gateway.now() < deadline) {
      // Another gateway may change the job: unless the change feed brings every gateway's
      // changes, poll the store as well.
      const pollMs = gateway.notifier.live
        ? gateway.config.feedSafetyPollMs
        : gateway.config.feedPollMs;
      const wake = gateway.notifier.next(id, pollMs, closed.signal);
      const rows = await gateway.stores.jobs.eventsAfter(id, seq);
      for (const row of rows) {
        seq = row.seq;
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
      await wake;
    }
    await stopping.hint();
  });
});
