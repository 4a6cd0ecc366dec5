import { HttpProblem } from "../../shared/errors.ts";
import type { Gateway } from "../context.ts";
import { RetryLaterProblem } from "../limits/backpressure.ts";
import type { JobRow } from "../store/job-rows.ts";
import type { ModelSwitchRow } from "../store/model-switches.ts";
import { type TtlCache, ttlCache } from "../ttl-cache.ts";

/**
 * How long a gateway trusts its reading of the paused models. A pause made through another
 * gateway takes effect here within this long; the one that made it forgets its reading at
 * once. Short, because claims and submits read it; cheap, because it is one small read.
 */
const SWITCHES_CACHE_MS = 1_000;

type Paused = Map<string, ModelSwitchRow>;
// Keyed by the notifier, which every per-request copy of a gateway shares (rate-limit.ts).
const readings = new WeakMap<object, TtlCache<Paused>>();
const KEY = "paused";

function readingsOf(gateway: Gateway): TtlCache<Paused> {
  let cache = readings.get(gateway.notifier);
  if (!cache) {
    // Not shared on Workers: a read begun by one request is its I/O (limits/cached-count.ts).
    cache = ttlCache<Paused>(SWITCHES_CACHE_MS, gateway.now, {
      shareLoads: !gateway.isolatedRequests,
    });
    readings.set(gateway.notifier, cache);
  }
  return cache;
}

/**
 * The models paused now, by id (from a reading at most SWITCHES_CACHE_MS old). When the
 * reading lapses, the submits and claims in flight share one read (`TtlCache.getOrLoad`):
 * each used to make its own (64 submitting connections: about 28 reads a second, each
 * behind the others, instead of 1). Not `sharedReadings` (shared-readings.ts), which serves
 * a lapsed reading while the next loads: a pause or resume must take effect within the
 * period, and a switch made here at once.
 */
export async function pausedModels(gateway: Gateway): Promise<Paused> {
  const paused = await readingsOf(gateway).getOrLoad(KEY, async () => {
    const rows = await gateway.stores.jobs.pausedModels();
    return new Map(rows.map((row) => [row.model, row]));
  });
  return paused ?? new Map();
}

/** After a switch through this gateway: the next reading is fresh, and none under way is kept. */
export function forgetSwitches(gateway: Gateway): void {
  readingsOf(gateway).delete(KEY);
}

/** A submit to a model paused with `reject_new`: 503 `model_paused`, with Retry-After. */
export async function assertModelAccepting(gateway: Gateway, model: string): Promise<void> {
  const paused = await pausedModels(gateway);
  const row = paused.get(model);
  if (row?.reject_new !== 1) return;
  throw new RetryLaterProblem(
    503,
    "model_paused",
    "Model paused",
    `The operator paused model "${model}"${row?.reason ? `: ${row.reason}` : ""}. Try again later.`,
    gateway.config.retryAfterSeconds,
  );
}

/**
 * Refuses a claim of a paused model's job (409, which the agent acks). The job stays
 * queued; its message is gone, so it is marked unpublished and the outbox publishes it
 * again once the model is resumed.
 */
export async function pausedClaimRefusal(gateway: Gateway, job: JobRow): Promise<HttpProblem> {
  await gateway.stores.jobs.markUnpublished(job.id);
  return new HttpProblem(
    409,
    "model_paused",
    "Job not available",
    `Model "${job.model}" is paused: the job waits until it is resumed.`,
  );
}
