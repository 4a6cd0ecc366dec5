import { pause, peerRetryDelayMs, type WaitBackoffOptions } from "../backoff.ts";
import { GatewayError } from "../gateway/client.ts";
import type { InFlightJob } from "./in-flight.ts";
import type { HeldCall, SupervisorEvent } from "./types.ts";

export interface HoldContext {
  emit(event: SupervisorEvent): void;
  backoff?: WaitBackoffOptions;
}

/** Thrown when a held job stops being ours: taken back at the drain, or its lease lost. */
export class HoldEnded extends Error {
  override name = "HoldEnded";
}

/**
 * Runs a gateway call the job cannot go on without (its claim, the report of its result),
 * and while the gateway is unreachable keeps the job and tries again, with capped backoff
 * and jitter, for as long as the job is ours: the heartbeat keeps its lease meanwhile.
 *
 * Handing the delivery back to the queue instead (as the agent once did) spends one of the
 * job's attempts on the gateway's outage and throws a finished result away, so the job runs
 * again; on its last attempt the message is dead-lettered while the gateway, which never
 * heard of it, still shows the job queued. An unreachable gateway is not the job's fault.
 *
 * Other gateway errors (a refusal, a malformed answer) are not waited out: they are thrown
 * as before. A job taken back or whose lease is lost ends the hold with `HoldEnded`.
 */
export async function untilGatewayAnswers<T>(
  job: InFlightJob,
  call: HeldCall,
  work: () => Promise<T>,
  ctx: HoldContext,
): Promise<T> {
  for (let round = 1; ; round++) {
    try {
      const result = await work();
      if (round > 1) job.log.info({ call, tries: round }, `the gateway answered the ${call}`);
      return result;
    } catch (cause) {
      if (!(cause instanceof GatewayError) || cause.code !== "gateway_unavailable") throw cause;
      if (!job.ours) throw new HoldEnded(why(job));
      const delay = peerRetryDelayMs(round, ctx.backoff);
      // Every held job says so on the first round, then every tenth: an agent holding its
      // whole look-ahead through an outage should not flood its log.
      const level = round === 1 || round % 10 === 0 ? "warn" : "debug";
      job.log[level](
        { err: cause, call, round, retry_in_ms: delay },
        `gateway unreachable; holding the job and retrying the ${call} in ${Math.ceil(delay / 100) / 10} s`,
      );
      ctx.emit({ type: "holding", jobId: job.jobId, attempt: job.attempt, call, round });
      await pause(delay, job.abort.signal);
      if (!job.ours) throw new HoldEnded(why(job));
    }
  }
}

const why = (job: InFlightJob) =>
  job.leaseLost
    ? "the job's lease was lost while the gateway was unreachable; another delivery owns it"
    : "the job was taken back while the gateway was unreachable";
