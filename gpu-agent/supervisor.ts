import type { JobError } from "../shared/protocol/error.ts";
import type { Consumer, Delivery } from "../shared/queue/port.ts";
import { runAttempt } from "./attempt.ts";
import { backoffMs } from "./backoff.ts";
import { GatewayError } from "./gateway/client.ts";
import { type JobHeartbeats, startHeartbeats } from "./heartbeat/job-lease.ts";
import { HoldEnded, untilGatewayAnswers } from "./hold.ts";
import { newInFlight } from "./in-flight.ts";
import { PoisonTracker } from "./runner/poison.ts";
import { createRunnerPool } from "./runner/pool.ts";
import type {
  HeldCall,
  InFlight,
  SettleOutcome,
  Supervisor,
  SupervisorEvent,
  SupervisorOptions,
  SupervisorStatus,
} from "./supervisor-types.ts";

export type * from "./supervisor-types.ts";

/**
 * Creates the supervisor. It holds the queue connection, the leases and the gateway talk;
 * inference runs in the runners' child processes, so this event loop stays free for
 * heartbeats however long a model takes, and a crashed runner costs one attempt, not the agent.
 *
 * One delivery: claim → download inputs → run → upload artifacts → report (the output
 * travels in it) → settle. The message is settled (ack, retry, dead-letter) only after the
 * gateway recorded the outcome, so a crash anywhere means redelivery, never a lost job.
 */
export function createSupervisor(options: SupervisorOptions): Supervisor {
  const { queue, gateway, config, logger } = options;
  const pool = createRunnerPool(options.runners);
  const inFlight = new Map<Delivery, InFlight>();
  const listeners = new Set<(event: SupervisorEvent) => void>();
  const idleWaiters: (() => void)[] = [];
  let state: SupervisorStatus["state"] = "idle";
  let consumer: Consumer | null = null;
  let heartbeats: JobHeartbeats | null = null;
  let drained: Promise<void> | null = null;
  let prefetch = 0;
  const retryDelay = options.retryDelayMs ?? ((attempt: number) => backoffMs(attempt));
  const transfer = {
    maxInputBytes: config.maxInputBytes,
    fetch: options.fetch,
    // Tenants' input URLs: public https only, plus what the operator allow-listed.
    inputUrls: { allow: config.inputUrlAllow ?? [], ...options.inputUrls },
  };
  const poison = new PoisonTracker({ crashes: options.poisonCrashes });
  const emit = (event: SupervisorEvent) => listeners.forEach((listener) => void listener(event));
  const hold = <T>(job: InFlight, call: HeldCall, work: () => Promise<T>) =>
    untilGatewayAnswers(job, call, work, { emit, backoff: options.gatewayBackoff });
  /** Settles once: whichever of the normal path and the drain deadline comes first wins. */
  async function settle(
    job: InFlight,
    outcome: SettleOutcome,
    error: JobError | null,
    action: () => Promise<unknown>,
  ): Promise<void> {
    if (job.settled) return;
    job.settled = true;
    let final = outcome;
    try {
      const result = await action();
      if (result === "dead-lettered") final = "dead-lettered";
    } catch (cause) {
      // The lease runs out and the queue delivers the job again: nothing is lost.
      job.log.error({ err: cause }, "could not settle the message; it will be redelivered");
    }
    job.log.info({ outcome: final, error_code: error?.code }, `job ${final}`);
    inFlight.delete(job.delivery);
    job.onSettled();
    emit({ type: "settled", jobId: job.jobId, attempt: job.attempt, outcome: final, error });
    if (inFlight.size === 0) for (const wake of idleWaiters.splice(0)) wake();
  }

  /**
   * The gateway refused or garbled a call (an unreachable one is waited out: hold.ts);
   * another delivery will redo the work and tell it.
   */
  const retryLater = (job: InFlight, cause: GatewayError) => {
    const error: JobError = { type: "transient", code: cause.code, message: cause.message };
    job.log.warn({ err: cause }, "gateway call failed; leaving the job to another delivery");
    return settle(job, "retried", error, () => job.delivery.retry(retryDelay(job.attempt), error));
  };

  async function handleJob(job: InFlight): Promise<void> {
    const claimed = await hold(job, "claim", () => gateway.claim(job.jobId, job.attempt));
    if (!claimed.ok) {
      job.log.info({ code: claimed.code, detail: claimed.detail }, "claim refused; not running");
      return settle(job, "refused", null, () => job.delivery.ack());
    }
    job.claimed = true;
    emit({
      type: "claimed",
      jobId: job.jobId,
      attempt: job.attempt,
      createdAt: claimed.claim.job.created_at,
    });
    // Released while the claim was in flight: not ours to run now; tell the gateway.
    if (job.settled) return reportReleased(job);
    const result = await runAttempt({
      jobId: job.jobId,
      attempt: job.attempt,
      claim: claimed.claim,
      pool,
      transfer,
      onPhase(phase, detail) {
        job.phase = phase;
        if (phase !== "running" || !detail) return;
        job.log.info(detail, "running");
        emit({ type: "running", jobId: job.jobId, attempt: job.attempt, ...detail });
      },
      isReleased: () => job.released,
      signal: job.abort.signal,
      ...(heartbeats && { progress: heartbeats.progressOf(job) }),
    });
    if (job.released) return;
    // Lease lost: a failure (a withdrawal) is the new delivery's; a result is still reported.
    if (job.leaseLost && !result.ok) return leaseLost(job);
    if (!result.ok) return fail(job, poison.judge(job.jobId, result.error));
    poison.forget(job.jobId);
    job.phase = "reporting";
    const report = { type: "succeeded" as const, attempt: job.attempt, output: result.output };
    await hold(job, "report", () => gateway.report(job.jobId, report));
    await settle(job, "succeeded", null, () => job.delivery.ack());
  }

  async function fail(job: InFlight, error: JobError): Promise<void> {
    const willRetry = error.type === "transient" && job.attempt < config.maxAttempts;
    job.log.warn(
      { error_code: error.code, error_type: error.type, will_retry: willRetry },
      error.message,
    );
    job.phase = "reporting";
    const report = { type: "failed" as const, attempt: job.attempt, error, will_retry: willRetry };
    await hold(job, "report", () => gateway.report(job.jobId, report));
    if (willRetry) {
      return settle(job, "retried", error, () =>
        job.delivery.retry(retryDelay(job.attempt), error),
      );
    }
    return settle(job, "dead-lettered", error, () => job.delivery.deadLetter(error));
  }

  function handle(delivery: Delivery): Promise<void> {
    const { job, settledPromise } = newInFlight(delivery, logger);
    inFlight.set(delivery, job);
    job.log.info("delivery received");
    // Fetched by the consumer as the drain began: back to the queue without a claim.
    if (state !== "running") {
      void release(job);
      return settledPromise;
    }
    handleJob(job).catch((cause) => {
      if (job.settled) return;
      if (cause instanceof HoldEnded) return job.leaseLost ? leaseLost(job) : undefined;
      if (cause instanceof GatewayError) return retryLater(job, cause);
      job.log.error({ err: cause }, "unexpected failure handling the job");
      const error: JobError = { type: "transient", code: "agent_error", message: String(cause) };
      return settle(job, "retried", error, () =>
        job.delivery.retry(retryDelay(job.attempt), error),
      );
    });
    // Resolves when the message is settled, not when the run ends: a job released at the
    // drain deadline must not hold up the consumer's stop while its runner is killed.
    return settledPromise;
  }

  /** Another delivery owns the job now: nothing to tell the queue, nothing to run. */
  const leaseLost = (job: InFlight) => settle(job, "lease-lost", null, async () => {});

  const reportReleased = (job: InFlight) =>
    gateway
      .report(job.jobId, { type: "released", attempt: job.attempt, reason: "agent shutting down" })
      .then(
        () => {},
        (cause) => job.log.warn({ err: cause }, "could not report the release"),
      );

  /** Tells the gateway and requeues at once for another agent. */
  async function release(job: InFlight): Promise<void> {
    if (job.released || job.settled) return;
    job.released = true;
    job.abort.abort();
    const error: JobError = {
      type: "transient",
      code: "agent_draining",
      message: "the agent shut down before the job finished",
    };
    if (job.claimed) await reportReleased(job);
    await settle(job, "released", error, () => job.delivery.retry(0, error));
  }

  /** Jobs claimed or being downloaded that no runner has started yet. */
  const notStarted = (job: InFlight) =>
    job.phase === "claiming" || job.phase === "downloading" || job.phase === "waiting";

  const whenIdle = () =>
    new Promise<void>((resolve) => {
      if (inFlight.size === 0) resolve();
      else idleWaiters.push(resolve);
    });

  async function drainNow(): Promise<void> {
    state = "draining";
    logger.info({ in_flight: inFlight.size, timeout_ms: config.drainTimeoutMs }, "draining");
    // The consumer may still hand over a delivery it was fetching, so "finished" means the
    // consumer has stopped and, after that, nothing is in flight here.
    const stopping = (consumer?.stop() ?? Promise.resolve()).catch((cause) =>
      logger.error({ err: cause }, "consumer stop failed"),
    );
    // A preempted host has seconds: the work read ahead for busy runners goes back to the
    // queue now, so the grace period is spent only on jobs that run at once. (A delivery
    // still arriving goes back too.)
    const waiting = [...inFlight.values()].filter(notStarted).sort((a, b) => a.since - b.since);
    await Promise.all(waiting.slice(pool.idleCapacity(config.models)).map(release));
    const finished = stopping.then(whenIdle);
    let deadline: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      deadline = setTimeout(() => resolve(true), config.drainTimeoutMs);
    });
    const late = await Promise.race([finished.then(() => false), timedOut]);
    clearTimeout(deadline);
    if (late) {
      logger.warn({ jobs: inFlight.size }, "drain timeout: releasing unfinished jobs");
      await Promise.all([...inFlight.values()].map(release));
      await stopping;
    }
    heartbeats?.stop();
    state = "stopped";
    logger.info("drained");
  }

  return {
    async start() {
      if (state !== "idle") throw new Error(`the supervisor is ${state}`);
      state = "running";
      heartbeats = startHeartbeats({
        gateway,
        intervalMs: config.heartbeatIntervalMs,
        leaseMs: config.leaseMs,
        targets: () => inFlight.values(),
        onBeat: (job) => emit({ type: "heartbeat", jobId: job.jobId, attempt: job.attempt }),
        onLeaseLost: (target) => {
          const job = inFlight.get(target.delivery);
          if (!job || job.leaseLost) return;
          job.leaseLost = true;
          // A job still waiting for a runner leaves the line; a held one stops retrying.
          job.abort.abort();
        },
      });
      try {
        // Runners busy with full batches plus the look-ahead, claimed and downloaded early.
        prefetch = pool.capacity(config.models) + (options.lookahead ?? pool.size);
        consumer = await queue.consume(handle, {
          prefetch,
          models: config.models,
          ...(config.overflowAfterMs ? { minAgeMs: config.overflowAfterMs } : {}),
        });
      } catch (cause) {
        heartbeats.stop();
        state = "stopped";
        throw cause;
      }
      logger.info({ slots: pool.size, prefetch, models: config.models }, "waiting for jobs");
    },

    drain() {
      drained ??= drainNow();
      return drained;
    },

    status() {
      const runners = pool.snapshot();
      return {
        state,
        slots: pool.size,
        busy: pool.busyCount(),
        waiting: pool.waitingCount(),
        provider: runners.find((r) => r.provider)?.provider ?? null,
        runners,
        inFlight: [...inFlight.values()].map((job) => ({
          jobId: job.jobId,
          attempt: job.attempt,
          model: job.model,
          phase: job.phase,
          since: new Date(job.since).toISOString(),
        })),
      };
    },

    on(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
