/**
 * The spans the gateway core and the agent make, behind an interface of our own: the core
 * runs on Workers too, and with tracing off (the default) nothing of OpenTelemetry is even
 * imported. `noopTracer` is what runs then; the Node processes swap in `otel-node.ts`'s when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Parents travel as W3C `traceparent` strings, the
 * form a job already stores and its queue message carries (../trace.ts).
 */

import { formatTraceparent, parseTraceparent } from "../trace.ts";

export type SpanAttributes = Record<string, string | number | boolean>;

export interface SpanOptions {
  /** The parent as a `traceparent`; absent or invalid: the span starts a trace. */
  parent?: string | null | undefined;
  kind?: "internal" | "server" | "client" | "producer" | "consumer";
  attributes?: SpanAttributes;
  /** Epoch milliseconds; default now. */
  startTime?: number;
}

export interface TraceSpan {
  /**
   * This span as a `traceparent`, the parent for work that carries on elsewhere (the job's
   * run on an agent). The noop span gives back its parent as version 00 (a later version's
   * fields dropped, as the spec asks), so with tracing off a job keeps the request's trace
   * context, in the form its queue message carries.
   */
  readonly traceparent: string | null;
  /** A child of this span. */
  child(name: string, options?: Omit<SpanOptions, "parent">): TraceSpan;
  setAttributes(attributes: SpanAttributes): void;
  addEvent(name: string, attributes?: SpanAttributes): void;
  /** Marks the span failed (OpenTelemetry's error status), with why. */
  fail(message: string): void;
  /** Epoch milliseconds; default now. */
  end(endTime?: number): void;
}

export interface Tracer {
  startSpan(name: string, options?: SpanOptions): TraceSpan;
}

class NoopSpan implements TraceSpan {
  constructor(readonly traceparent: string | null) {}
  child(): TraceSpan {
    return this;
  }
  setAttributes(): void {}
  addEvent(): void {}
  fail(): void {}
  end(): void {}
}

/**
 * Tracing off: spans cost an object, and a job's trace context passes through, read as
 * version 00: a later version's header (longer, with fields of its own) stored as sent would
 * not fit the queue message, and no publish of its job would ever succeed.
 */
export const noopTracer: Tracer = {
  startSpan: (_name, options) => {
    const parent = parseTraceparent(options?.parent);
    return new NoopSpan(parent ? formatTraceparent(parent) : null);
  },
};
