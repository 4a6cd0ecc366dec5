import type { SpanAttributes, Tracer, TraceSpan } from "../../shared/tracing/tracer.ts";
import type { JobPhase, SettleOutcome } from "./types.ts";

/** The span each phase of an attempt is, under the attempt's `job` span. */
const SPAN_OF: Record<JobPhase, string> = {
  claiming: "claim",
  downloading: "download",
  // Downloaded, waiting for a runner (and a batch to form, the model to load).
  waiting: "prepare",
  running: "inference",
  uploading: "upload",
  reporting: "report",
};

/**
 * One delivery's spans: a `job` span, a child of the trace context its queue message carries
 * (the gateway's submit of it), and one child per phase as the supervisor enters it. With
 * the noop tracer every call is a no-op.
 */
export class JobTrace {
  readonly #job: TraceSpan;
  #phase: { name: JobPhase; span: TraceSpan } | null = null;
  /** The inference span, ended at its time once the run's provider and device are known. */
  #inference: { span: TraceSpan; endTime: number } | null = null;

  constructor(tracer: Tracer, parent: string | undefined, attributes: SpanAttributes) {
    this.#job = tracer.startSpan("job", { parent, kind: "consumer", attributes });
  }

  enter(phase: JobPhase, attributes?: SpanAttributes): void {
    this.#endPhase();
    const span = this.#job.child(SPAN_OF[phase], attributes ? { attributes } : {});
    this.#phase = { name: phase, span };
  }

  /** Attributes of the phase the job is in (the inference's runner and batch). */
  annotate(attributes: SpanAttributes): void {
    this.#phase?.span.setAttributes(attributes);
  }

  /** What the run used (provider, device): on the inference span and the job's. */
  used(attributes: SpanAttributes): void {
    this.#job.setAttributes(attributes);
    const inference = this.#inference;
    this.#inference = null;
    inference?.span.setAttributes(attributes);
    inference?.span.end(inference.endTime);
  }

  /** The delivery settled: an attempt that did not end the job's way is marked failed. */
  end(outcome: SettleOutcome): void {
    this.#endPhase();
    this.#inference?.span.end(this.#inference.endTime);
    this.#inference = null;
    this.#job.setAttributes({ "gantry.outcome": outcome });
    if (outcome !== "succeeded" && outcome !== "refused") this.#job.fail(outcome);
    this.#job.end();
  }

  #endPhase(): void {
    const phase = this.#phase;
    this.#phase = null;
    if (phase?.name === "running") this.#inference = { span: phase.span, endTime: Date.now() };
    else phase?.span.end();
  }
}
