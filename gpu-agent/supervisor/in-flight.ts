import type { Logger } from "pino";
import type { Delivery } from "../../shared/queue/port.ts";
import { traceIdOf } from "../../shared/trace.ts";
import { noopTracer, type Tracer } from "../../shared/tracing/tracer.ts";
import type { HeartbeatTarget } from "../heartbeat/job-lease.ts";
import type { AttemptPhase } from "./attempt.ts";
import { JobTrace } from "./job-trace.ts";
import type { JobPhase, SettleOutcome } from "./types.ts";

/**
 * Where one delivery is, from receipt to settle. One union rather than a phase and flags, so
 * that what cannot happen cannot be written: a job is claimed exactly when it is past
 * `claiming`, only a job still being worked on can lose its lease, and a settled job is
 * nothing else any more.
 */
export type Lifecycle =
  /** Asking the gateway for the job (held while the gateway is unreachable). */
  | { phase: "claiming"; leaseLost: boolean }
  /** Claimed: the attempt downloads, waits for a runner, runs, uploads. */
  | { phase: AttemptPhase; leaseLost: boolean }
  /** Telling the gateway the attempt's outcome (held likewise). */
  | { phase: "reporting"; leaseLost: boolean }
  /**
   * Taken back at the drain: a claimed job's release is being told to the gateway, then the
   * queue. `was` is where it stood, which `status()` still shows.
   */
  | { phase: "releasing"; was: JobPhase; leaseLost: boolean }
  /** Its outcome decided: the queue is being told, then the job leaves the supervisor. */
  | { phase: "settled"; was: JobPhase; outcome: SettleOutcome };

type Working = Exclude<Lifecycle, { phase: "releasing" | "settled" }>;

const isWorking = (state: Lifecycle): state is Working =>
  state.phase !== "releasing" && state.phase !== "settled";

/**
 * The supervisor's record of one delivery. Its state changes only through the transitions
 * below, each of which says whether it happened, so two paths racing to the same end (the
 * normal path and the drain deadline, say) settle a job once.
 */
export class InFlightJob implements HeartbeatTarget {
  readonly jobId: string;
  readonly attempt: number;
  readonly model: string;
  readonly since = Date.now();
  readonly log: Logger;
  /** Aborted on release or a lost lease, so a job still waiting for a runner leaves the line. */
  readonly abort = new AbortController();
  /**
   * Resolves when the job has left the supervisor, not when its run ends: a job released at
   * the drain deadline must not hold up the consumer's stop while its runner is killed.
   */
  readonly done: Promise<void>;
  #resolveDone: () => void = () => {};
  #state: Lifecycle = { phase: "claiming", leaseLost: false };
  #withdrawn = false;
  /** Its spans, in the trace its queue message carries (tracing off: no-ops). */
  readonly trace: JobTrace;

  constructor(
    readonly delivery: Delivery,
    logger: Logger,
    tracer: Tracer = noopTracer,
  ) {
    const { message } = delivery;
    this.trace = new JobTrace(tracer, message.traceparent, {
      "gantry.job_id": message.id,
      "gantry.attempt": delivery.attempt,
      "gantry.model": message.model,
    });
    this.trace.enter("claiming");
    this.jobId = message.id;
    this.attempt = delivery.attempt;
    this.model = message.model;
    this.log = logger.child({
      job_id: message.id,
      attempt: delivery.attempt,
      model: message.model,
      trace_id: traceIdOf(message.traceparent),
    });
    this.done = new Promise<void>((resolve) => {
      this.#resolveDone = resolve;
    });
  }

  get state(): Lifecycle {
    return this.#state;
  }

  /** Where the job stands, as `status()` shows it. */
  get phase(): JobPhase {
    const state = this.#state;
    return isWorking(state) ? state.phase : state.was;
  }

  /** Only a claimed job is the gateway's business; before that only the lease matters. */
  get claimed(): boolean {
    const state = this.#state;
    return (isWorking(state) ? state.phase : state.was) !== "claiming";
  }

  get settled(): boolean {
    return this.#state.phase === "settled";
  }

  /** Taken back at the drain: whatever its run yields is dropped. */
  get released(): boolean {
    const state = this.#state;
    return (
      state.phase === "releasing" || (state.phase === "settled" && state.outcome === "released")
    );
  }

  /** The queue said the lease is gone (expired and redelivered): the job is not ours. */
  get leaseLost(): boolean {
    const state = this.#state;
    return state.phase === "settled" ? state.outcome === "lease-lost" : state.leaseLost;
  }

  /** Still ours to carry on with: neither taken back nor its lease lost. */
  get ours(): boolean {
    return isWorking(this.#state) && !this.#state.leaseLost;
  }

  /** No runner has started it yet: claiming, downloading, or waiting for one. */
  get notStarted(): boolean {
    const { phase } = this;
    return phase === "claiming" || phase === "downloading" || phase === "waiting";
  }

  /** The gateway handed the job over; false when it was settled meanwhile (released). */
  claim(): boolean {
    const state = this.#state;
    if (state.phase !== "claiming") return false;
    this.#state = { phase: "downloading", leaseLost: state.leaseLost };
    this.trace.enter("downloading");
    return true;
  }

  /** The attempt moved on, or its outcome is being reported. A job taken back stays so. */
  enter(phase: AttemptPhase | "reporting"): void {
    const state = this.#state;
    if (state.phase === "claiming" || !isWorking(state)) return;
    this.#state = { phase, leaseLost: state.leaseLost };
    if (state.phase !== phase) this.trace.enter(phase);
  }

  /** Marks the lease lost and stops waiting for a runner; false if known or already settled. */
  loseLease(): boolean {
    const state = this.#state;
    if (state.phase === "settled" || state.leaseLost) return false;
    this.#state = { ...state, leaseLost: true };
    this.abort.abort();
    return true;
  }

  /**
   * The gateway no longer expects this attempt (canceled, say): a job not yet in a runner
   * (downloading, waiting for one) stops, to be settled unrun; false where it is past that.
   */
  withdraw(code: string): boolean {
    const phase = this.#state.phase;
    if (phase !== "downloading" && phase !== "waiting") return false;
    this.#withdrawn = true;
    this.log.info({ code }, "withdrawn before it ran");
    this.abort.abort();
    return true;
  }

  /** Whether `withdraw` stopped it. */
  get withdrawn(): boolean {
    return this.#withdrawn;
  }

  /** Takes the job back; false when it was already taken back or settled. */
  release(): boolean {
    const state = this.#state;
    if (!isWorking(state)) return false;
    this.#state = { phase: "releasing", was: state.phase, leaseLost: state.leaseLost };
    this.abort.abort();
    return true;
  }

  /** Decides the outcome; false when another path already did. */
  settle(outcome: SettleOutcome): boolean {
    const state = this.#state;
    if (state.phase === "settled") return false;
    this.#state = { phase: "settled", was: this.phase, outcome };
    this.trace.end(outcome);
    return true;
  }

  /** The queue was told (or failed to be): the job is gone from the supervisor. */
  leave(): void {
    this.#resolveDone();
  }
}
