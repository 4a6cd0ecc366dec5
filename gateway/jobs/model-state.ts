import type { ModelState } from "../../shared/protocol/index.ts";
import { registeredModels } from "../agents/reports.ts";
import { isLive } from "../agents/view.ts";
import type { Gateway } from "../context.ts";
import { modelPace } from "./model-pace.ts";
import { pausedModels } from "./model-switches.ts";
import { sharedReadings } from "./shared-readings.ts";

/** The most agents read to count a model's, those heard from last (the listing pages on). */
export const AGENTS_READ = 500;

/** Counting a model's jobs reads its whole queue: once per period for every reader. */
const counts = sharedReadings<{ queued: number; running: number }>({
  periodMs: (gateway) => gateway.config.queueDepthCacheMs,
});

/** A model's queued and running jobs, from the reading every reader shares. */
export function modelJobCounts(gateway: Gateway, model: string) {
  return counts.get(gateway, model, () => gateway.stores.jobs.modelJobCounts(model));
}

/** A model's live state, as `GET /v1/models/{id}` shows it. */
export async function modelState(gateway: Gateway, model: string): Promise<ModelState> {
  const now = gateway.now();
  const [paused, jobCounts, pace, agents] = await Promise.all([
    pausedModels(gateway),
    modelJobCounts(gateway, model),
    modelPace(gateway, model),
    gateway.stores.agents.heardFrom(AGENTS_READ),
  ]);
  const switched = paused.get(model);
  const serving = agents.filter(
    (agent) => isLive(agent, now) && registeredModels(agent).includes(model),
  );
  const perSecond = pace.startsPerSecond;
  return {
    paused: switched !== undefined,
    reject_new: switched?.reject_new === 1,
    paused_at: switched?.paused_at ? new Date(switched.paused_at).toISOString() : null,
    reason: switched?.reason ?? null,
    queued: jobCounts.queued,
    running: jobCounts.running,
    agents: serving.length,
    starts_per_minute: perSecond === null ? null : Math.round(perSecond * 60 * 10) / 10,
    wait_p50_ms: pace.waitP50Ms,
    wait_p95_ms: pace.waitP95Ms,
  };
}
