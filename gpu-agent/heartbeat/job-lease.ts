import type { Logger } from "pino";
import { type Delivery, LeaseLostError } from "../../shared/queue/port.ts";
import type { GatewayClient } from "../gateway/client.ts";

/** What the heartbeat loop needs to know about one in-flight job. */
export interface HeartbeatTarget {
  readonly delivery: Delivery;
  readonly jobId: string;
  readonly attempt: number;
  readonly log: Logger;
  /** Only a claimed job is the gateway's business; before that only the lease matters. */
  readonly claimed: boolean;
  readonly settled: boolean;
}

export interface HeartbeatOptions {
  gateway: GatewayClient;
  intervalMs: number;
  leaseMs: number;
  targets(): Iterable<HeartbeatTarget>;
  onBeat?(target: HeartbeatTarget): void;
  /** The queue says the lease is gone: the message went to another delivery. */
  onLeaseLost?(target: HeartbeatTarget): void;
}

/**
 * On a timer, independent of inference (which runs in child processes, leaving this event
 * loop free): extend each in-flight lease and tell the gateway the attempt is alive. A job
 * whose previous beat is still in progress (a slow gateway) is skipped, not doubled up.
 */
export function startHeartbeats(options: HeartbeatOptions): { stop(): void } {
  const beating = new Set<HeartbeatTarget>();

  async function beatOne(target: HeartbeatTarget): Promise<void> {
    try {
      await target.delivery.extendLease(options.leaseMs);
    } catch (cause) {
      target.log.warn({ err: cause }, "could not extend the lease");
      // Not ours any more: beating for it would only confuse the gateway.
      if (cause instanceof LeaseLostError) return options.onLeaseLost?.(target);
    }
    if (target.claimed && !target.settled) {
      try {
        const answer = await options.gateway.heartbeat(target.jobId, target.attempt);
        if (!answer.ok) {
          // The runner cannot be interrupted mid-inference; the gateway ignores the result.
          target.log.info({ code: answer.code }, "the gateway no longer expects this attempt");
        }
      } catch (cause) {
        target.log.warn({ err: cause }, "heartbeat failed");
      }
    }
    options.onBeat?.(target);
  }

  const timer = setInterval(() => {
    for (const target of options.targets()) {
      if (target.settled || beating.has(target)) continue;
      beating.add(target);
      beatOne(target).finally(() => beating.delete(target));
    }
  }, options.intervalMs);
  // The queue consumer keeps the process alive; heartbeats alone must not.
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
