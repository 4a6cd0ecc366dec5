/**
 * W3C Trace Context `traceparent` (https://www.w3.org/TR/trace-context/): the one header
 * that ties a job's log lines together from the API request, through the queue message,
 * to the agent that runs it. Runtime-free: Web Crypto only, so the gateway core on
 * Workers and the agent on Node share it.
 */

import { toHex } from "./hex.ts";
import { randomIdBytes } from "./random-bytes.ts";

/** A parsed `traceparent`, version 00. */
export interface TraceContext {
  /** 32 lowercase hex digits; names the whole trace (the job's journey). */
  traceId: string;
  /** 16 lowercase hex digits; names the span that sent this header. */
  spanId: string;
  /** Trace flags; bit 0 is `sampled`. */
  flags: number;
}

/**
 * Version 00 exactly; a later version (any but the forbidden `ff`) as far as version 00 goes,
 * with whatever it adds after the flags behind a dash: the spec's "Versioning of traceparent"
 * asks a receiver to read a higher version so, and the trace goes on as version 00 (the
 * fields this project does not know are not forwarded).
 */
const TRACEPARENT =
  /^(?:00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})|(?!00|ff)[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?)$/;
const ALL_ZERO = /^0+$/;

/**
 * The trace context in a `traceparent` header, or null when it is absent or invalid. Per
 * the spec an all-zero trace or span id is invalid, and the receiver then starts a new trace.
 */
export function parseTraceparent(header: string | null | undefined): TraceContext | null {
  if (!header) return null;
  const match = TRACEPARENT.exec(header.trim());
  if (!match) return null;
  const traceId = match[1] ?? match[4] ?? "";
  const spanId = match[2] ?? match[5] ?? "";
  const flags = match[3] ?? match[6] ?? "";
  if (ALL_ZERO.test(traceId) || ALL_ZERO.test(spanId)) return null;
  return { traceId, spanId, flags: Number.parseInt(flags, 16) };
}

export function formatTraceparent(context: TraceContext): string {
  const flags = (context.flags & 0xff).toString(16).padStart(2, "0");
  return `00-${context.traceId}-${context.spanId}-${flags}`;
}

/** A fresh trace, sampled: for a request that arrived without a `traceparent`. */
export function newTraceparent(): string {
  return formatTraceparent({ traceId: randomHex(16), spanId: randomHex(8), flags: 1 });
}

/**
 * A span within the same trace: same trace id and flags, a new span id. The gateway
 * publishing a job and the agent running it are each a child of the request's span.
 */
export function childSpan(parent: string | TraceContext): string {
  const context = typeof parent === "string" ? parseTraceparent(parent) : parent;
  if (!context) return newTraceparent();
  return formatTraceparent({ ...context, spanId: randomHex(8) });
}

/**
 * The trace a request belongs to: its own valid `traceparent` (the W3C header, honoured on
 * every API request that makes a job), else a fresh one started here.
 */
export function requestTraceparent(header: string | null | undefined): string {
  const context = parseTraceparent(header);
  return context ? formatTraceparent(context) : newTraceparent();
}

/** The trace id in a header, for log lines (`trace_id`); undefined when there is none. */
export function traceIdOf(header: string | null | undefined): string | undefined {
  return parseTraceparent(header)?.traceId;
}

function randomHex(bytes: number): string {
  const buffer = randomIdBytes(bytes);
  // An all-zero id is invalid; 2^-64 at worst, but cheap to rule out.
  if (buffer.every((byte) => byte === 0)) buffer[0] = 1;
  return toHex(buffer);
}
