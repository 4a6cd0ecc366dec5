import type { Logger } from "pino";
import type { JobError } from "../../shared/protocol/error.ts";
import { type Delivery, LeaseLostError } from "../../shared/queue/port.ts";
import type { Tracer } from "../../shared/tracing/tracer.ts";
import type { WaitBackoffOptions } from "../backoff.ts";
import { type GatewayClient, GatewayError } from "../gateway/client.ts";
import type { JobProgressSink } from "../heartbeat/job-lease.ts";
import type { RunnerPool } from "../runner/pool.ts";
import type { TransferOptions } from "../transfer/files.ts";
import { runAttempt } from "./attempt.ts";
import { HoldEnded, untilGatewayAnswers } from "./hold.ts";
import { InFlightJob } from "./in-flight.ts";
import { PoisonTracker } from "./poison.ts";
import { DRAINING, reportReleased, sendBack } from "./release.ts";
import { type ReportUsage, usageAttributes, usageFields } from "./report-usage.ts";
import type { HeldCall, SettleOutcome, SupervisorEvent } from "./types.ts";

export interface DeliveriesOptions {
  gateway: GatewayClient;
  pool: RunnerPool;
  transfer: TransferOptions;
  logger: Logger;
  maxAttempts: number;
  retryDelay(attempt: number): number;
  poisonCrashes?: number | undefined;
  gatewayBackoff?: WaitBackoffOptions | undefined;
  emit(event: SupervisorEvent): void;
  /** Whether the supervisor still takes work; a delivery handed over in the drain goes back. */
  taking(): boolean;
  /** How long a success's report may wait to share a request with others (supervisor). */
  reportLingerMs?(): number;
  /** Where a claimed job's progress goes (its heartbeats), once they run. */
  progressOf(job: InFlightJob): JobProgressSink | undefined;
  /** Spans of each job's run (OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT is set). */
  tracer?: Tracer | undefined;
}

/**
 * The deliveries the agent holds and what becomes of each: claim → download inputs → run →
 * upload artifacts → report (the output travels in it) → settle. The message is settled (ack,
 * retry, dead-letter) only after the gateway recorded the outcome, so a crash anywhere means
 * redelivery, never a lost job.
 */
export class Deliveries {
  readonly #jobs = new Map<Delivery, InFlightJob>();
  readonly #idleWaiters: (() => void)[] = [];
  readonly #poison: PoisonTracker;
  /**
   * Each job's latest claim here, by the delivery that made it, and the claim of it still in
   * flight. A later claim of a job this agent still runs means the earlier run's life is
   * over (canceled, then retried; or taken over after its lease ran out). A retry starts the
   * attempts again, so both runs may be attempt 1 of this agent and the gateway cannot tell
   * their reports apart: the earlier run reports nothing (`#superseded`).
   */
  readonly #latestClaim = new Map<string, InFlightJob>();
  readonly #claiming = new Map<string, Promise<unknown>>();

  constructor(private readonly options: DeliveriesOptions) {
    this.#poison = new PoisonTracker({ crashes: options.poisonCrashes });
  }

  get size(): number {
    return this.#jobs.size;
  }

  jobs(): IterableIterator<InFlightJob> {
    return this.#jobs.values();
  }

  /** Jobs no runner has started yet (claiming, downloading, waiting for one). */
  notStarted(): number {
    let count = 0;
    for (const job of this.#jobs.values()) if (job.notStarted) count++;
    return count;
  }

  /** Resolves once nothing is in flight. */
  whenIdle(): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.#jobs.size === 0) resolve();
      else this.#idleWaiters.push(resolve);
    });
  }

  /** The queue consumer's handler: resolves once the message is settled, not the run ended. */
  handle(delivery: Delivery): Promise<void> {
    const job = new InFlightJob(delivery, this.options.logger, this.options.tracer);
    this.#jobs.set(delivery, job);
    job.log.info("delivery received");
    // Fetched by the consumer as the drain began: back to the queue without a claim.
    if (!this.options.taking()) {
      void this.release(job);
      return job.done;
    }
    this.#run(job).catch((cause) => {
      if (job.settled) return;
      if (cause instanceof HoldEnded) return job.leaseLost ? this.#leaseLost(job) : undefined;
      if (cause instanceof GatewayError) return this.#retryLater(job, cause);
      job.log.error({ err: cause }, "unexpected failure handling the job");
      const error: JobError = { type: "transient", code: "agent_error", message: String(cause) };
      return this.#settle(job, "retried", error, () =>
        job.delivery.retry(this.options.retryDelay(job.attempt), error),
      );
    });
    return job.done;
  }

  /** The queue says the lease is gone: a job waiting for a runner leaves the line, a held one stops retrying. */
  loseLease(delivery: Delivery): void {
    this.#jobs.get(delivery)?.loseLease();
  }

  /** The gateway refused a heartbeat of its attempt: a job not yet in a runner stops. */
  withdraw(delivery: Delivery, code: string): void {
    this.#jobs.get(delivery)?.withdraw(code);
  }

  /** Tells the gateway (if it had claimed the job) and requeues at once for another agent. */
  async release(job: InFlightJob): Promise<void> {
    if (!job.release()) return;
    // A job the gateway claimed as it handed the delivery out is claimed as well.
    const { gateway } = this.options;
    const claimed = job.claimed || gateway.claimedAhead?.(job.jobId, job.attempt);
    let free = !claimed && job.phase !== "claiming";
    if (claimed && !(await this.#superseded(job))) free = await reportReleased(gateway, job);
    await this.#settle(job, "released", DRAINING, () => sendBack(job, free));
  }

  async #run(job: InFlightJob): Promise<void> {
    const { gateway, emit } = this.options;
    const claiming = this.#hold(job, "claim", () => gateway.claim(job.jobId, job.attempt));
    this.#claiming.set(job.jobId, claiming);
    const claimed = await claiming.finally(() => {
      if (this.#claiming.get(job.jobId) === claiming) this.#claiming.delete(job.jobId);
    });
    if (!claimed.ok) {
      job.log.info({ code: claimed.code, detail: claimed.detail }, "claim refused; not running");
      return this.#settle(job, "refused", null, () => job.delivery.ack());
    }
    this.#latestClaim.set(job.jobId, job);
    const createdAt = claimed.claim.job.created_at;
    emit({ type: "claimed", jobId: job.jobId, attempt: job.attempt, createdAt });
    // Released while the claim was in flight: not ours to run now; tell the gateway.
    if (!job.claim()) return void (await reportReleased(gateway, job));
    const progress = this.options.progressOf(job);
    const result = await runAttempt({
      jobId: job.jobId,
      attempt: job.attempt,
      claim: claimed.claim,
      pool: this.options.pool,
      transfer: this.options.transfer,
      onPhase(phase, detail) {
        job.enter(phase);
        if (phase !== "running" || !detail) return;
        job.trace.annotate({ "gantry.runner": detail.runner, "gantry.batch_size": detail.batch });
        job.log.info(detail, "running");
        emit({ type: "running", jobId: job.jobId, attempt: job.attempt, ...detail });
      },
      isReleased: () => job.released,
      signal: job.abort.signal,
      ...(progress && { progress }),
    });
    if (job.released) return;
    if (await this.#superseded(job)) return this.#dropSuperseded(job);
    // Lease lost: a failure (a withdrawal) is the new delivery's; a result is still reported.
    if (job.leaseLost && !result.ok) return this.#leaseLost(job);
    // Withdrawn unrun (its job canceled, say): its message is done with, as a refused claim's.
    if (job.withdrawn && !result.ok)
      return this.#settle(job, "refused", null, () => job.delivery.ack());
    const usage = usageFields(result.usage);
    job.trace.used(usageAttributes(usage));
    if (!result.ok) return this.#fail(job, this.#poison.judge(job.jobId, result.error), usage);
    this.#poison.forget(job.jobId);
    job.enter("reporting");
    // A delivery of the gateway's queue is acked by the gateway with the report.
    const byReport = job.delivery.ackByReport;
    const report = {
      type: "succeeded" as const,
      attempt: job.attempt,
      output: result.output,
      ...usage,
      ...(byReport && { ack_receipt: byReport.receipt }),
    };
    const lingerMs = this.options.reportLingerMs?.() ?? 0;
    const { acked } = await this.#hold(job, "report", () =>
      gateway.report(job.jobId, report, { lingerMs }),
    );
    await this.#settle(job, "succeeded", null, () =>
      byReport && acked !== undefined ? byReport.acked(acked) : job.delivery.ack(),
    );
  }

  async #fail(job: InFlightJob, error: JobError, usage: ReportUsage = {}): Promise<void> {
    const willRetry = error.type === "transient" && job.attempt < this.options.maxAttempts;
    job.log.warn(
      { error_code: error.code, error_type: error.type, will_retry: willRetry },
      error.message,
    );
    job.enter("reporting");
    const report = {
      type: "failed" as const,
      attempt: job.attempt,
      error,
      will_retry: willRetry,
      ...usage,
    };
    await this.#hold(job, "report", () => this.options.gateway.report(job.jobId, report));
    if (willRetry) {
      return this.#settle(job, "retried", error, () =>
        job.delivery.retry(this.options.retryDelay(job.attempt), error),
      );
    }
    return this.#settle(job, "dead-lettered", error, () => job.delivery.deadLetter(error));
  }

  /** Whether a later claim of its job here took over (see `#latestClaim`). */
  async #superseded(job: InFlightJob): Promise<boolean> {
    // A claim still on its way may be the later one: its answer decides.
    await this.#claiming.get(job.jobId)?.catch(() => {});
    const latest = this.#latestClaim.get(job.jobId);
    return latest !== undefined && latest !== job;
  }

  /** Its job lives on under a later claim: its outcome is no one's, its message is done. */
  #dropSuperseded(job: InFlightJob): Promise<void> {
    job.log.info("a later claim of this job took over; this run's outcome is dropped");
    return this.#settle(job, "refused", null, () => job.delivery.ack());
  }

  #hold<T>(job: InFlightJob, call: HeldCall, work: () => Promise<T>): Promise<T> {
    const { emit, gatewayBackoff } = this.options;
    return untilGatewayAnswers(job, call, work, { emit, backoff: gatewayBackoff });
  }

  /**
   * The gateway refused or garbled a call (an unreachable one is waited out: hold.ts);
   * another delivery will redo the work and tell it.
   */
  #retryLater(job: InFlightJob, cause: GatewayError): Promise<void> {
    const error: JobError = { type: "transient", code: cause.code, message: cause.message };
    job.log.warn({ err: cause }, "gateway call failed; leaving the job to another delivery");
    return this.#settle(job, "retried", error, () =>
      job.delivery.retry(this.options.retryDelay(job.attempt), error),
    );
  }

  /** Another delivery owns the job now: nothing to tell the queue, nothing to run. */
  #leaseLost(job: InFlightJob): Promise<void> {
    return this.#settle(job, "lease-lost", null, async () => {});
  }

  /** Settles once: whichever of the normal path and the drain deadline comes first wins. */
  async #settle(
    job: InFlightJob,
    outcome: SettleOutcome,
    error: JobError | null,
    action: () => Promise<unknown>,
  ): Promise<void> {
    if (!job.settle(outcome)) return;
    let final = outcome;
    try {
      const result = await action();
      if (result === "dead-lettered") final = "dead-lettered";
    } catch (cause) {
      if (cause instanceof LeaseLostError) {
        // The queue no longer holds this delivery: settled already (a resent report whose
        // first answer was lost, the gateway acked it then) or handed out again; either way
        // the job's fate is another settle's, and nothing will come back for this one.
        job.log.warn({ err: cause }, "the message was already settled or delivered again");
      } else {
        // The lease runs out and the queue delivers the job again: nothing is lost.
        job.log.error({ err: cause }, "could not settle the message; it will be redelivered");
      }
    }
    job.log.info({ outcome: final, error_code: error?.code }, `job ${final}`);
    this.#jobs.delete(job.delivery);
    if (this.#latestClaim.get(job.jobId) === job) this.#latestClaim.delete(job.jobId);
    job.leave();
    this.options.emit({
      type: "settled",
      jobId: job.jobId,
      attempt: job.attempt,
      outcome: final,
      error,
    });
    if (this.#jobs.size === 0) for (const wake of this.#idleWaiters.splice(0)) wake();
  }
}
