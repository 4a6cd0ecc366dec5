import type { Logger } from "pino";
import type { Delivery } from "../shared/queue/port.ts";
import { traceIdOf } from "../shared/trace.ts";
import type { InFlight } from "./supervisor-types.ts";

/** The supervisor's record of a delivery just received, and a promise of its settling. */
export function newInFlight(
  delivery: Delivery,
  logger: Logger,
): { job: InFlight; settledPromise: Promise<void> } {
  const { message } = delivery;
  let onSettled = () => {};
  const settledPromise = new Promise<void>((resolve) => {
    onSettled = resolve;
  });
  const job: InFlight = {
    delivery,
    jobId: message.id,
    attempt: delivery.attempt,
    model: message.model,
    phase: "claiming",
    since: Date.now(),
    log: logger.child({
      job_id: message.id,
      attempt: delivery.attempt,
      model: message.model,
      trace_id: traceIdOf(message.traceparent),
    }),
    claimed: false,
    released: false,
    abort: new AbortController(),
    settled: false,
    onSettled,
    holding: null,
    leaseLost: false,
  };
  return { job, settledPromise };
}
