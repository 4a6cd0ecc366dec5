import type { Gateway } from "../context.ts";
import { sharedReadings } from "./shared-readings.ts";

/** How far back a model's starts count towards its pace. */
export const PACE_WINDOW_MS = 5 * 60_000;
/** At most this many recent starts are read (the pace of a busy model needs no more). */
const PACE_SAMPLE = 1_000;
const MIN_SPAN_MS = 10_000;
/** A reading serves every job view of the model for this long. */
const PACE_CACHE_MS = 5_000;

export interface ModelPace {
  /** Jobs started per second over the window, or null with fewer than two starts. */
  startsPerSecond: number | null;
  /**
   * The pace a job queued now should expect (its `estimated_start_at`): the last minute's
   * when that is faster, else the window's. A model that got busy after an idle spell ran
   * ten times faster than its five minutes' pace said, and its jobs' estimates were as late.
   */
  startRate: number | null;
  /** Queue waits of the sampled starts, in ms: p50 and p95, or null with none. */
  waitP50Ms: number | null;
  waitP95Ms: number | null;
  sampled: number;
}

// No pace is not kept: reading an empty index range is cheap, and the first starts of an
// idle model then show at once.
const paces = sharedReadings<ModelPace>({
  periodMs: PACE_CACHE_MS,
  keep: (pace) => pace.startsPerSecond !== null,
});

/** A model's recent pace, from its jobs' starts (an index range: migration 0009). */
export function modelPace(gateway: Gateway, model: string): Promise<ModelPace> {
  return paces.get(gateway, model, async () => {
    const now = gateway.now();
    const starts = await gateway.stores.jobs.recentStarts(model, now - PACE_WINDOW_MS, PACE_SAMPLE);
    return paceOf(starts, now);
  });
}

/** How far back the pace of a model that just got busy is read (`startRate`). */
const LATELY_MS = 60_000;

/** Starts per second over the time `starts` (newest first) span up to now; null with fewer than two. */
function rateOf(starts: { started_at: number }[], now: number): number | null {
  const oldest = starts.at(-1)?.started_at;
  // Over the time the sample spans (a model that began work a minute ago has a minute's
  // pace, not five minutes'), but never less than MIN_SPAN_MS: two starts a millisecond
  // apart are no pace.
  const span = oldest === undefined ? 0 : Math.max(now - oldest, MIN_SPAN_MS);
  return starts.length >= 2 && span > 0 ? (starts.length * 1000) / span : null;
}

function paceOf(starts: { started_at: number; queue_ms: number }[], now: number): ModelPace {
  const waits = starts.map((start) => start.queue_ms).sort((a, b) => a - b);
  const pick = (q: number) =>
    waits.length ? waits[Math.min(waits.length - 1, Math.floor(q * waits.length))]! : null;
  const startsPerSecond = rateOf(starts, now);
  const lately = rateOf(
    starts.filter((start) => start.started_at >= now - LATELY_MS),
    now,
  );
  return {
    startsPerSecond,
    startRate: Math.max(startsPerSecond ?? 0, lately ?? 0) || null,
    waitP50Ms: pick(0.5),
    waitP95Ms: pick(0.95),
    sampled: starts.length,
  };
}
