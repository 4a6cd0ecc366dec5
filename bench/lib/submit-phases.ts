/**
 * Where an accepted `POST /v1/jobs` spends its time, from the gateway's own histogram
 * (`gantry_gateway_submit_phase_seconds` on its metrics listener's `/metrics`): the mean of each phase between two
 * readings, and the share of submits that took longer than a bound. What the client saw
 * beyond the three phases is HTTP, routing, auth, body parsing and the load generator.
 * Not a benchmark itself: queue-submit.ts reads it.
 */
import { SUBMIT_PHASES, type SubmitPhase } from "../../gateway/context.ts";

/** Per phase: seconds summed, submits counted, and counts by bucket bound (`le`). */
export type PhaseReading = Map<
  SubmitPhase,
  { sum: number; count: number; le: Map<number, number> }
>;

/**
 * Reads the histogram from the gateway's metrics listener (`GANTRY_METRICS_PORT`; its full
 * `…/metrics` URL); empty when the gateway has none (an older build, Workers).
 */
export async function readPhases(metricsUrl: string): Promise<PhaseReading> {
  const text = await (await fetch(metricsUrl)).text();
  const reading: PhaseReading = new Map();
  // The Prometheus text format, one sample per line; no parser library reads it back.
  const sample = /^gantry_gateway_submit_phase_seconds_(sum|count|bucket)\{(.*)\} (\S+)$/;
  for (const line of text.split("\n")) {
    const hit = sample.exec(line);
    if (!hit) continue;
    const labels = Object.fromEntries(
      [...hit[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    const phase = labels.phase as SubmitPhase;
    const entry = reading.get(phase) ?? { sum: 0, count: 0, le: new Map<number, number>() };
    reading.set(phase, entry);
    const value = Number(hit[3]);
    if (hit[1] === "sum") entry.sum = value;
    else if (hit[1] === "count") entry.count = value;
    else entry.le.set(labels.le === "+Inf" ? Number.POSITIVE_INFINITY : Number(labels.le), value);
  }
  return reading;
}

/**
 * One line: each phase's mean (and the share above 10 ms) between two readings, and the
 * rest of `clientMeanMs` (the load generator's mean latency) that no phase accounts for.
 */
export function describePhases(
  before: PhaseReading,
  after: PhaseReading,
  clientMeanMs: number,
): string {
  const parts: string[] = [];
  let accounted = 0;
  for (const phase of SUBMIT_PHASES) {
    const a = after.get(phase);
    const b = before.get(phase);
    if (!a) continue;
    const count = a.count - (b?.count ?? 0);
    if (count <= 0) continue;
    const meanMs = ((a.sum - (b?.sum ?? 0)) / count) * 1000;
    const under10 = (a.le.get(0.01) ?? 0) - (b?.le.get(0.01) ?? 0);
    accounted += meanMs;
    parts.push(
      `${phase} ${meanMs.toFixed(2)} ms (${((100 * (count - under10)) / count).toFixed(1)}% > 10 ms)`,
    );
  }
  if (parts.length === 0) return "the gateway reports no submit phases";
  const rest = clientMeanMs - accounted;
  return `mean per accepted job: ${parts.join(", ")}; the rest ${rest.toFixed(2)} ms (HTTP, auth, parsing, the load generator) of ${clientMeanMs.toFixed(2)} ms`;
}
