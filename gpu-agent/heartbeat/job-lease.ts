import type { Logger } from "pino";
import type { ProgressReport } from "../../shared/protocol/index.ts";
import { type Delivery, LeaseLostError } from "../../shared/queue/port.ts";
import type { GatewayClient } from "../gateway/client.ts";
import { ProgressPacer } from "./progress-pacer.ts";

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
  /**
   * The gateway no longer expects this attempt (the job was canceled, ended or expired, or
   * another attempt holds it): `code` is its refusal's.
   */
  onRefused?(target: HeartbeatTarget, code: string): void;
  /** Least time between two progress reports of one job to the gateway. Default 250 ms. */
  progressIntervalMs?: number;
}

/** What the supervisor hands a run for its progress (see `ProgressPacer`). */
export interface JobProgressSink {
  report(progress: ProgressReport): void;
  /** The latest report out before the result; at most `FLUSH_TIMEOUT_MS`. */
  flush(): Promise<void>;
}

export interface JobHeartbeats {
  stop(): void;
  /** The sink for one claimed job's progress, created on first use. */
  progressOf(target: HeartbeatTarget): JobProgressSink;
}

const FLUSH_TIMEOUT_MS = 1_000;

/**
 * On a timer, independent of inference (which runs in child processes, leaving this event
 * loop free): extend each in-flight lease and tell the gateway the attempt is alive. The two
 * go apart: a beat to the gateway still on its way (a slow or hung gateway, a progress
 * report it has not answered) never holds up the next lease extension, which is what keeps
 * the job this agent's. Either one still in progress for a job is skipped, not doubled up.
 */
export function startHeartbeats(options: HeartbeatOptions): JobHeartbeats {
  const extending = new Set<HeartbeatTarget>();
  const beating = new Set<HeartbeatTarget>();
  const lost = new WeakSet<HeartbeatTarget>();
  const pacers = new WeakMap<HeartbeatTarget, ProgressPacer>();
  const beat = (target: HeartbeatTarget, progress?: ProgressReport) =>
    options.gateway.heartbeat(target.jobId, target.attempt, progress);

  async function extendOne(target: HeartbeatTarget): Promise<void> {
    try {
      await target.delivery.extendLease(options.leaseMs);
      options.onBeat?.(target);
    } catch (cause) {
      target.log.warn({ err: cause }, "could not extend the lease");
      if (cause instanceof LeaseLostError) {
        // Not ours any more: beating for it would only confuse the gateway.
        lost.add(target);
        options.onLeaseLost?.(target);
      }
    }
  }

  async function beatGateway(target: HeartbeatTarget): Promise<void> {
    try {
      const pacer = pacers.get(target);
      const answer = await (pacer
        ? pacer.carry((progress) => beat(target, progress))
        : beat(target));
      if (!answer.ok) {
        // A runner cannot be interrupted mid-inference (the gateway refuses its result), but
        // a job still waiting for one need not run at all.
        target.log.info({ code: answer.code }, "the gateway no longer expects this attempt");
        options.onRefused?.(target, answer.code);
      }
    } catch (cause) {
      target.log.warn({ err: cause }, "heartbeat failed");
    }
  }

  const start = (set: Set<HeartbeatTarget>, target: HeartbeatTarget, work: () => Promise<void>) => {
    if (set.has(target)) return;
    set.add(target);
    void work().finally(() => set.delete(target));
  };
  const timer = setInterval(() => {
    for (const target of options.targets()) {
      if (target.settled || lost.has(target)) continue;
      start(extending, target, () => extendOne(target));
      if (target.claimed) start(beating, target, () => beatGateway(target));
    }
  }, options.intervalMs);
  // The queue consumer keeps the process alive; heartbeats alone must not.
  timer.unref();
  return {
    stop: () => clearInterval(timer),
    progressOf(target) {
      let pacer = pacers.get(target);
      if (!pacer) {
        pacer = new ProgressPacer({
          send: (progress) => beat(target, progress),
          minIntervalMs: options.progressIntervalMs ?? 250,
          isLive: () => target.claimed && !target.settled,
          onError: (cause) => target.log.warn({ err: cause }, "progress heartbeat failed"),
        });
        pacers.set(target, pacer);
      }
      const paced = pacer;
      return {
        report: (progress) => paced.report(progress),
        flush: () => paced.flush(FLUSH_TIMEOUT_MS),
      };
    },
  };
}
