import type { RunRequest } from "../inference/types.ts";
import type { BatchPolicy } from "../runner/types.ts";

/** A request waiting for a runner. */
export interface WaitingRequest {
  request: RunRequest;
  /** When it first joined the queue (ms, monotonic); a retried request keeps its place. */
  enqueuedAt: number;
  /** Runs alone: its last batch crashed the runner and the culprit is not known yet. */
  solo: boolean;
  /** The largest batch it may join: halved each time a batch it was in ran out of memory. */
  batchCap: number;
}

/** What a free runner should do now. */
export type NextBatch =
  | { kind: "run"; items: WaitingRequest[] }
  | { kind: "wait"; until: number }
  | { kind: "idle" };

/**
 * Which models a runner has loaded (`warm`): their batches go first, unless a cold model's
 * oldest request has waited `coldAfterMs`, so preferring warm models never starves one.
 */
export interface WarmPreference {
  warm(model: string): boolean;
  coldAfterMs: number;
}

/** Weight of the newest gap in a model's mean gap between arrivals. */
const GAP_WEIGHT = 0.3;
/** Gaps seen before the window adapts: a few arrivals say little about a rate. */
const MIN_GAPS = 8;

/**
 * Requests waiting for a runner, one FIFO per model. A free runner takes the model whose
 * oldest request has waited longest, and from it as many requests as its batch allows. A
 * batch that is not full waits for company until its first request has waited `windowMs`
 * (Triton's max queue delay): when runners are busy, requests pile up anyway and leave as
 * full batches without waiting.
 *
 * The window adapts to how fast the model's requests arrive (`arrived`): when they come
 * further apart than the window, company would not come in time, so a batch leaves at once
 * (no latency added at low load); when they come close together, a batch waits while they
 * keep coming at that pace, up to the window. Until a few arrivals are known, the window
 * applies as is.
 */
export class WaitingQueue {
  private readonly byModel = new Map<string, WaitingRequest[]>();
  /** Per model: when the last request arrived and the mean gap between arrivals (ms). */
  private readonly arrivals = new Map<string, { last: number; gap: number; gaps: number }>();

  /** Notes a new request of `model` at `now` (not a retried one): the arrival rate. */
  arrived(model: string, now: number, windowMs: number): void {
    const seen = this.arrivals.get(model);
    if (!seen) {
      this.arrivals.set(model, { last: now, gap: 0, gaps: 0 });
      return;
    }
    // Capped, so one quiet spell does not hide the next burst for long.
    const sample = Math.min(now - seen.last, 4 * windowMs);
    seen.gap = seen.gaps === 0 ? sample : seen.gap + GAP_WEIGHT * (sample - seen.gap);
    seen.gaps++;
    seen.last = now;
  }

  /**
   * Until when a batch whose first request came at `since` waits for company: the window,
   * cut short when the model's requests come further apart than the window (no company
   * would come in time) and when they stop coming at their usual pace.
   */
  private deadline(model: string, since: number, windowMs: number): number {
    const seen = this.arrivals.get(model);
    const full = since + windowMs;
    if (!seen || seen.gaps < MIN_GAPS || windowMs <= 0) return full;
    if (seen.gap >= windowMs) return since;
    // Half a window at least after the last arrival: a burst that lands together is not cut
    // short by a scheduler's hiccup between two of its jobs.
    return Math.min(full, seen.last + Math.max(2 * seen.gap, windowMs / 2));
  }

  get size(): number {
    let total = 0;
    for (const queue of this.byModel.values()) total += queue.length;
    return total;
  }

  /** The models that have requests waiting, the one whose oldest waited longest first. */
  oldestModels(): string[] {
    return [...this.byModel.entries()]
      .sort(([, a], [, b]) => a[0]!.enqueuedAt - b[0]!.enqueuedAt)
      .map(([model]) => model);
  }

  add(item: WaitingRequest): void {
    const model = item.request.model;
    const queue = this.byModel.get(model) ?? [];
    // Back in line after a failed batch: ahead of younger requests, in arrival order.
    const at = queue.findIndex((other) => other.enqueuedAt > item.enqueuedAt);
    if (at < 0) queue.push(item);
    else queue.splice(at, 0, item);
    this.byModel.set(model, queue);
  }

  /** Takes `item` out if it is still waiting; true when it was. */
  remove(item: WaitingRequest): boolean {
    const queue = this.byModel.get(item.request.model);
    const at = queue?.indexOf(item) ?? -1;
    if (!queue || at < 0) return false;
    queue.splice(at, 1);
    if (queue.length === 0) this.byModel.delete(item.request.model);
    return true;
  }

  /**
   * The batch a runner with `policyOf` should run at `now`, or when to ask again. A runner
   * that cannot batch gets a batch of one. A runner that is busy (it would prepare this batch
   * beside the one it runs) passes `soloAllowed: false`: a job that must run alone is left
   * for an idle runner. With `prefer`, models warm on the runner go before cold ones.
   */
  next(
    policyOf: (model: string) => BatchPolicy,
    now: number,
    soloAllowed = true,
    prefer?: WarmPreference,
  ): NextBatch {
    const rank = ([model, queue]: [string, WaitingRequest[]]) =>
      !prefer || prefer.warm(model) || now - queue[0]!.enqueuedAt >= prefer.coldAfterMs ? 0 : 1;
    const models = [...this.byModel.entries()].sort(
      (a, b) => rank(a) - rank(b) || a[1][0]!.enqueuedAt - b[1][0]!.enqueuedAt,
    );
    let until = Number.POSITIVE_INFINITY;
    for (const [model, queue] of models) {
      const first = queue[0]!;
      if (first.solo && !soloAllowed) continue;
      const policy = policyOf(model);
      let limit = first.solo ? 1 : Math.max(1, Math.min(policy.maxBatch, first.batchCap));
      let count = 0;
      for (const item of queue) {
        if (count >= limit || (count > 0 && item.solo)) break;
        limit = Math.min(limit, item.batchCap);
        count++;
      }
      count = Math.min(count, limit);
      const deadline = this.deadline(model, first.enqueuedAt, policy.windowMs);
      if (limit === 1 || count >= limit || now >= deadline) {
        const items = queue.splice(0, count);
        if (queue.length === 0) this.byModel.delete(model);
        return { kind: "run", items };
      }
      until = Math.min(until, deadline);
    }
    return Number.isFinite(until) ? { kind: "wait", until } : { kind: "idle" };
  }
}
