import type { Consumer } from "../../shared/queue/port.ts";
import { backoffMs } from "../backoff.ts";
import { type JobHeartbeats, startHeartbeats } from "../heartbeat/job-lease.ts";
import { createRunnerPool, type RunnerPool } from "../runner/pool.ts";
import { Deliveries } from "./deliveries.ts";
import type { InFlightJob } from "./in-flight.ts";
import type { Supervisor, SupervisorEvent, SupervisorOptions, SupervisorStatus } from "./types.ts";

export type * from "./types.ts";

/**
 * Creates the supervisor. It holds the queue connection, the leases and the gateway talk;
 * inference runs in the runners' child processes, so this event loop stays free for
 * heartbeats however long a model takes, and a crashed runner costs one attempt, not the agent.
 * What becomes of each delivery is `Deliveries`' business (deliveries.ts).
 */
export function createSupervisor(options: SupervisorOptions): Supervisor {
  return new AgentSupervisor(options);
}

class AgentSupervisor implements Supervisor {
  #state: SupervisorStatus["state"] = "idle";
  readonly #pool: RunnerPool;
  readonly #deliveries: Deliveries;
  readonly #listeners = new Set<(event: SupervisorEvent) => void>();
  #consumer: Consumer | null = null;
  #prefetch: number | undefined;
  /** The consumer's refill mark (`refillMark`), known once it starts. */
  #refillAt = 1;
  /** When the last success was reported (`#reportLingerMs`). */
  #reportedAt = Number.NEGATIVE_INFINITY;
  #heartbeats: JobHeartbeats | null = null;
  #drained: Promise<void> | null = null;

  constructor(private readonly options: SupervisorOptions) {
    const { config } = options;
    this.#pool = createRunnerPool(options.runners, undefined, {
      logger: options.logger,
      ...options.pool,
    });
    this.#deliveries = new Deliveries({
      gateway: options.gateway,
      pool: this.#pool,
      logger: options.logger,
      maxAttempts: config.maxAttempts,
      transfer: {
        maxInputBytes: config.maxInputBytes,
        fetch: options.fetch,
        // Tenants' input URLs: public https only, plus what the operator allow-listed.
        inputUrls: { allow: config.inputUrlAllow ?? [], ...options.inputUrls },
      },
      retryDelay: options.retryDelayMs ?? ((attempt: number) => backoffMs(attempt)),
      poisonCrashes: options.poisonCrashes,
      gatewayBackoff: options.gatewayBackoff,
      emit: (event) => this.#emit(event),
      tracer: options.tracer,
      taking: () => this.#state === "running",
      progressOf: (job) => this.#heartbeats?.progressOf(job),
      reportLingerMs: () => this.#reportLingerMs(),
    });
  }

  /**
   * A success's report waits up to `REPORT_LINGER_MS` for others to share its request while
   * at least the refill mark of jobs wait for a runner (they wait longer than that anyway)
   * and the previous success was reported less than that ago: short jobs, whose full agent
   * otherwise reports (and the gateway writes, and the queue acks) one or two at a time. A
   * full agent of slow jobs would wait for nothing. At ordinary load, never.
   */
  #reportLingerMs(): number {
    const now = Date.now();
    const frequent = now - this.#reportedAt < REPORT_LINGER_MS;
    this.#reportedAt = now;
    // Counted last: it walks every delivery held, up to the look-ahead, on each success.
    const linger =
      frequent && this.#refillAt > 1 && this.#deliveries.notStarted() >= this.#refillAt;
    return linger ? REPORT_LINGER_MS : 0;
  }

  async start(): Promise<void> {
    const { queue, gateway, config, logger } = this.options;
    if (this.#state !== "idle") throw new Error(`the supervisor is ${this.#state}`);
    this.#state = "running";
    const deliveries = this.#deliveries;
    const heartbeats = startHeartbeats({
      gateway,
      intervalMs: config.heartbeatIntervalMs,
      leaseMs: config.leaseMs,
      targets: () => deliveries.jobs(),
      onBeat: (job) => this.#emit({ type: "heartbeat", jobId: job.jobId, attempt: job.attempt }),
      onLeaseLost: (target) => deliveries.loseLease(target.delivery),
      onRefused: (target, code) => deliveries.withdraw(target.delivery, code),
    });
    this.#heartbeats = heartbeats;
    let prefetch: number;
    try {
      // Runners busy with full batches plus the look-ahead, claimed and downloaded early.
      const lookahead = this.options.lookahead ?? this.#pool.size;
      prefetch = this.#pool.capacity(config.models) + lookahead;
      this.#refillAt = refillMark(lookahead);
      this.#consumer = await queue.consume((delivery) => deliveries.handle(delivery), {
        prefetch,
        refillAt: this.#refillAt,
        models: config.models,
        ...(config.overflowAfterMs ? { minAgeMs: config.overflowAfterMs } : {}),
      });
      // Said (status().prefetch, and so registered) only once a consumer takes that many.
      this.#prefetch = prefetch;
    } catch (cause) {
      heartbeats.stop();
      this.#state = "stopped";
      throw cause;
    }
    logger.info({ slots: this.#pool.size, prefetch, models: config.models }, "waiting for jobs");
  }

  drain(): Promise<void> {
    this.#drained ??= this.#drainNow();
    return this.#drained;
  }

  status(): SupervisorStatus {
    const pool = this.#pool;
    const runners = pool.snapshot();
    return {
      state: this.#state,
      slots: pool.size,
      busy: pool.busyCount(),
      waiting: pool.waitingCount(),
      provider: runners.find((r) => r.provider)?.provider ?? null,
      runners,
      failedGpus: pool.failedGpus?.() ?? [],
      ...(this.#prefetch === undefined ? {} : { prefetch: this.#prefetch }),
      inFlight: [...this.#deliveries.jobs()].map((job) => ({
        jobId: job.jobId,
        attempt: job.attempt,
        model: job.model,
        phase: job.phase,
        since: new Date(job.since).toISOString(),
      })),
    };
  }

  on(listener: (event: SupervisorEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit(event: SupervisorEvent): void {
    for (const listener of this.#listeners) void listener(event);
  }

  async #drainNow(): Promise<void> {
    const { config, logger } = this.options;
    const deliveries = this.#deliveries;
    this.#state = "draining";
    logger.info({ in_flight: deliveries.size, timeout_ms: config.drainTimeoutMs }, "draining");
    // The consumer may still hand over a delivery it was fetching, so "finished" means the
    // consumer has stopped and, after that, nothing is in flight here.
    const stopping = (this.#consumer?.stop() ?? Promise.resolve()).catch((cause) =>
      logger.error({ err: cause }, "consumer stop failed"),
    );
    // A preempted host has seconds: the work read ahead for busy runners goes back to the
    // queue now, so the grace period is spent only on jobs that run at once. (A delivery
    // still arriving goes back too.)
    const waiting = [...deliveries.jobs()]
      .filter((job) => job.notStarted)
      .sort((a, b) => a.since - b.since);
    const release = (job: InFlightJob) => deliveries.release(job);
    await Promise.all(waiting.slice(this.#pool.idleCapacity(config.models)).map(release));
    const finished = stopping.then(() => deliveries.whenIdle());
    let deadline: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      deadline = setTimeout(() => resolve(true), config.drainTimeoutMs);
    });
    const late = await Promise.race([finished.then(() => false), timedOut]);
    clearTimeout(deadline);
    if (late) {
      logger.warn({ jobs: deliveries.size }, "drain timeout: releasing unfinished jobs");
      await Promise.all([...deliveries.jobs()].map(release));
      await stopping;
    }
    this.#heartbeats?.stop();
    this.#state = "stopped";
    logger.info("drained");
  }
}

/** How long a success's report may wait to share a request while the agent is full. */
const REPORT_LINGER_MS = 25;

/**
 * A full agent leases again once a quarter of its look-ahead is free (ConsumeOptions.refillAt):
 * at its prefetch it would otherwise lease, and claim at the gateway, one job per job that
 * ends. Below the look-ahead plus one, so a runner never waits on it; 1 (every freed slot)
 * for the default look-ahead of one per runner up to three.
 */
export function refillMark(lookahead: number): number {
  return 1 + Math.floor(lookahead / 4);
}
