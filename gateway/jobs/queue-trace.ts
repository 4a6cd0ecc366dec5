import type { Gateway } from "../context.ts";
import type { JobRow } from "../store/job-rows.ts";

/**
 * The wait in the queue as a span of the job's trace, a child of its submit (issue 28): from
 * the moment the job could first be waited for to the claim that ended the wait, made by the
 * gateway that recorded the claim, from the claimed row alone (no read, nothing sent when
 * tracing is off). A first attempt waits from its commit, held time included; a later one
 * from its latest release (`released_at`), the first moment the store keeps of that attempt.
 */
export function traceQueueWait(gateway: Gateway, row: JobRow): void {
  if (!gateway.tracer || !row.traceparent || row.started_at === null) return;
  const start = row.attempt <= 1 ? row.created_at : (row.released_at ?? row.created_at);
  const span = gateway.tracer.startSpan("queue", {
    parent: row.traceparent,
    kind: "consumer",
    startTime: Math.min(start, row.started_at),
    attributes: {
      "gantry.job_id": row.id,
      "gantry.model": row.model,
      "gantry.attempt": row.attempt,
      "gantry.agent_id": row.agent_id ?? "",
    },
  });
  span.end(row.started_at);
}
