import type { JobError } from "../../shared/protocol/error.ts";
import type { GatewayClient } from "../gateway/client.ts";
import type { InFlightJob } from "./in-flight.ts";

/** Why a draining agent's job went back to the queue. */
export const DRAINING: JobError = {
  type: "transient",
  code: "agent_draining",
  message: "the agent shut down before the job finished",
};

/** Tells the gateway the attempt goes back unfinished; whether it took it (queued again). */
export function reportReleased(gateway: GatewayClient, job: InFlightJob): Promise<boolean> {
  const released = {
    type: "released" as const,
    attempt: job.attempt,
    reason: "agent shutting down",
  };
  return gateway.report(job.jobId, released).then(
    () => true,
    (cause) => {
      job.log.warn({ err: cause }, "could not report the release");
      return false;
    },
  );
}

/**
 * Sends a released job's message back. One that never ran, of which the gateway holds no
 * claim (none made nor under way, or its release taken: `free`), goes back unspent where the
 * queue can (Delivery.giveBack): a retry spent one of the job's attempts on a run that never
 * was, so an agent restarted with jobs read ahead (a deploy) spent one on each of them.
 */
export function sendBack(job: InFlightJob, free: boolean): Promise<unknown> {
  const { delivery } = job;
  if (free && job.notStarted && delivery.giveBack) return delivery.giveBack();
  return delivery.retry(0, DRAINING);
}
