import { linkSignals } from "../../shared/abort-link.ts";
import { pause } from "../../shared/pause.ts";
import { isTerminal, type JobStatus } from "../../shared/protocol/index.ts";
import type { Gateway } from "../context.ts";
import type { JobRow } from "../store/job-rows.ts";

/** The longest `Prefer: wait` honoured, in seconds (a bare `Prefer: wait` means this). */
export const MAX_WAIT_SECONDS = 60;

/**
 * A change made in this process (an agent's report to this gateway) wakes a waiter at once
 * through the notifier, and so does one made by another gateway when the notifier is `live`
 * (the cross-gateway change feed: Postgres LISTEN/NOTIFY on Node). Without a live feed (SQLite
 * with several processes, D1 on Workers) a waiter re-reads its job every RECHECK_MS: a
 * bounded, coarse fallback. With one, the re-read is only a safety net.
 */
const RECHECK_MS = 2_000;
const SAFETY_NET_MS = 30_000;

/**
 * The seconds a `Prefer` header asks to wait (RFC 7240): `wait=N`, or a bare `wait` for
 * the most; null when it asks for none. Preferences are hints, so a malformed one is
 * ignored rather than refused, and a longer wait is cut to the most.
 */
export function preferredWait(header: string | undefined): number | null {
  if (!header) return null;
  for (const part of header.split(",")) {
    const [name, value] = part
      .split(";")[0]!
      .split("=", 2)
      .map((s) => s.trim());
    if (name?.toLowerCase() !== "wait") continue;
    if (value === undefined || value === "") return MAX_WAIT_SECONDS;
    const seconds = Number(value.replace(/^"|"$/g, ""));
    if (!Number.isInteger(seconds) || seconds < 0) return null;
    return seconds === 0 ? null : Math.min(seconds, MAX_WAIT_SECONDS);
  }
  return null;
}

/**
 * Holds until the job is terminal or `timeoutMs` passes (or the client goes away), and
 * returns the job as it then is. Each wake-up costs one primary-key read.
 */
export async function waitForJob(
  gateway: Gateway,
  row: JobRow,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<JobRow> {
  // A shutting-down gateway answers now: the client gets a 202 and waits elsewhere. Not
  // AbortSignal.any: each wait left a WeakRef behind for good on `stopping`, which lives
  // as long as the gateway (shared/abort-link.ts).
  const done = new AbortController();
  const link = linkSignals(signal, gateway.stopping, done.signal);
  try {
    return await waitUntil(gateway, row, timeoutMs, link.signal);
  } finally {
    // Ends the wake still pending when the job ended: left, it held its listener on the
    // notifier (and its timer) for the rest of its recheck, 30 s with a live feed.
    done.abort();
    link.dispose();
  }
}

async function waitUntil(
  gateway: Gateway,
  row: JobRow,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<JobRow> {
  const deadline = gateway.now() + timeoutMs;
  let current = row;
  while (!isTerminal(current.status as JobStatus) && !signal.aborted) {
    const left = deadline - gateway.now();
    if (left <= 0) break;
    // Listening starts before the read, so a change between the two is not missed.
    const recheck = gateway.notifier.live ? SAFETY_NET_MS : RECHECK_MS;
    // Workers: a wake from another request (the agent's report) would carry this request's
    // next read into that request's I/O context, which workerd forbids; so a waiter there
    // polls on a timer of its own, one primary-key read per tick, never a scan.
    const wake = gateway.isolatedRequests
      ? pause(Math.min(left, RECHECK_MS), signal)
      : gateway.notifier.next(current.id, Math.min(left, recheck), signal);
    current = (await gateway.stores.jobs.byId(current.id)) ?? current;
    if (isTerminal(current.status as JobStatus)) break;
    await wake;
  }
  return current;
}
