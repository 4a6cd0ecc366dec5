import { registeredModels } from "../agents/reports.ts";
import { isLive } from "../agents/view.ts";
import type { Gateway } from "../context.ts";
import { gathered } from "../gathered.ts";
import { windowRoom } from "../store/release-line.ts";
import { pickReleases, snapshotLimits } from "./fair-order.ts";
import { AGENTS_READ } from "./model-state.ts";
import { publishJobs } from "./publish.ts";
import { sharedReadings } from "./shared-readings.ts";

/**
 * The fair release (issue 26). A committed job is held in the store; only a bounded window
 * of each model's jobs is in the broker at a time (`GANTRY_RELEASE_WINDOW`, or what the
 * model's live agents take from the queue at once when that is more), released in fair order
 * (gateway/jobs/fair-order.ts), so a tenant that arrives behind another's backlog waits
 * behind at most the window, not the backlog, and no tenant runs past `max_running_jobs`.
 * Every transport gets the same order: the broker only ever holds what agents are about to
 * take.
 *
 * A pass starts after a submit commits (the submit answers without waiting for it: the
 * commit is what makes the job durable), after a job leaves `queued` or `running` (a claim
 * frees room in the window, an end frees a place under the tenant's limit), and on every
 * sweep. The store marks the picks released in the
 * same pass that chooses them (gateway/store/job-release.ts); a gateway that dies after the
 * mark and before the publish leaves released, unpublished jobs, which any gateway's outbox
 * sweep publishes.
 *
 * Passes of one model on one gateway do not overlap: a pass asked for while one runs is
 * run once after it, for every caller that asked meanwhile (they all wait for that one), so
 * a burst of submits, claims and ends costs a pass or two, not one each. The first pass on
 * an idle model starts at once: a lone tenant's job goes out now.
 */
export function releaseModel(gateway: Gateway, model: string): Promise<number> {
  // Workers: a promise one request's I/O settles cannot be awaited by another request.
  if (gateway.isolatedRequests) return releasePass(gateway, model).then((pass) => pass.released);
  const lane = laneOf(gateway, model);
  if (lane.next) return lane.next;
  const start = (): Promise<number> => {
    const run: Promise<number> = releasePass(gateway, model)
      .then((pass) => {
        lane.held = pass.held;
        lane.fullUntil = pass.full ? gateway.now() + FULL_TRUSTED_MS : 0;
        return pass.released;
      })
      .finally(() => {
        if (lane.running === run) lane.running = null;
      });
    lane.running = run;
    return run;
  };
  if (!lane.running) return start();
  // A burst (a flood of submits, an agent's batch of claims and reports) is one pass: it
  // reads the model's held jobs once, not once per job. No linger before it: what queues up
  // behind the running pass is batch enough (measured on queue-e2e, a linger of 25 ms: paced
  // p50 35 ms against 17, saturated 962 jobs/s against 1 188).
  const next = lane.running
    .catch(() => 0)
    .then(() => {
      lane.next = null;
      return start();
    });
  lane.next = next;
  return next;
}

type Lane = {
  running: Promise<number> | null;
  next: Promise<number> | null;
  /** Whether its last pass found jobs of the model held; null before the first. */
  held: boolean | null;
  /**
   * Until when its last pass counts as having found the window full: jobs held and no room
   * left (it was full, or its picks filled it). A submit or a success cannot let a job go
   * until a claim, which starts a pass of its own. (Not "nothing held": another gateway's
   * submit may have held one since, and a success here is then what lets it go under its
   * tenant's limit.) 0: not full.
   */
  fullUntil: number;
};

/**
 * How long a pass's finding of a full window stands. Another gateway's claims make room
 * without this gateway's lane hearing of it; its own passes then release what is held, but a
 * submit here after the last of them would wait for the sweep. Under a flood the passes of
 * this gateway's own claims find it again well within this.
 */
const FULL_TRUSTED_MS = 250;
// Keyed by the notifier, which every per-request copy of a gateway shares (queue-position.ts).
const passes = new WeakMap<object, Map<string, Lane>>();

function laneOf(gateway: Gateway, model: string): Lane {
  const table = passes.get(gateway.notifier) ?? new Map<string, Lane>();
  passes.set(gateway.notifier, table);
  const lane = table.get(model) ?? { running: null, next: null, held: null, fullUntil: 0 };
  table.set(model, lane);
  return lane;
}

/**
 * Starts a pass in the background: a submit's job was held. None while the model's window
 * is full (`Lane.fullUntil`): a held job adds no room, whatever its priority or tenant, and
 * the next claim's pass reads the whole line, this job with it. Under a flood of submits
 * that was most of the passes, each a read of the line for nothing.
 */
export function kickRelease(gateway: Gateway, model: string): void {
  if (windowFull(gateway, model)) return;
  gateway.background(releaseSoon(gateway, model));
}

/** Whether this gateway's last pass of `model` left its window full (`Lane.fullUntil`). */
const windowFull = (gateway: Gateway, model: string) =>
  gateway.now() < (passes.get(gateway.notifier)?.get(model)?.fullUntil ?? 0);

/**
 * Starts a pass in the background, soon: a job left the window or the tenant's running
 * count. The claims and ends of a few milliseconds share one pass (`afterChangeDelayMs`): at
 * ordinary load nothing is held (a submit's job goes out with its insert, job-inserts.ts),
 * and a pass after each of them was a read of the line each, most of a paced job's
 * statements (issue 29). Under a backlog the window is at least what the agents read ahead,
 * so they do not run dry meanwhile.
 */
export function kickReleaseAfterChange(gateway: Gateway, model: string, status: string): void {
  // A success ends a running job: it frees a place under its tenant's `max_running_jobs`,
  // never room in the window (store/release-line.ts `windowRoom`). While the window is
  // full, only a claim can let held jobs go, and each claim kicks its own pass; at
  // saturation a pass after every batch of reports read the line for nothing (nine passes
  // in ten, issue 29).
  // Any other end may come from `queued` (a cancel, an expiry: room freed), so it kicks.
  if (status === "succeeded" && windowFull(gateway, model)) return;
  const gather = afterChangeDelayMs(gateway, model) === SOON_MS ? gatherSoon : gatherLater;
  gather(gateway, model, () => releaseSoon(gateway, model));
}

/** Gathering, while jobs of the model wait in the store (or nobody has looked yet). */
const SOON_MS = 5;
/**
 * Gathering, while the model's last pass found none of its jobs held: a job held since was
 * held by a submit, whose own pass started at once, so what waits here is only room the
 * claims and ends opened for jobs that are not there. At 200 jobs/s on Postgres the passes
 * after claims and ends read the line 0.66 times a job with 5 ms; one pass in 50 ms is 20
 * reads a second whatever the rate.
 */
const LATER_MS = 50;
const gatherSoon = gathered(SOON_MS);
const gatherLater = gathered(LATER_MS);

/** How long the passes after a model's claims and ends gather (`kickReleaseAfterChange`). */
export function afterChangeDelayMs(gateway: Gateway, model: string): number {
  return passes.get(gateway.notifier)?.get(model)?.held === false ? LATER_MS : SOON_MS;
}

/**
 * One pass: picks, marks and publishes; returns how many jobs it released and whether jobs
 * of the model were held.
 */
async function releasePass(
  gateway: Gateway,
  model: string,
): Promise<{ released: number; held: boolean; full: boolean }> {
  // A paused model is released as any other: agents' claims of its window are refused and
  // those jobs wait unpublished until the resume (model-switches.ts), which leaves the
  // window full, so the rest of its jobs wait held.
  const window = await releaseWindow(gateway, model);
  // Stays 0 where the store calls no chooser: it found nothing held, or no room.
  let roomLeft = 0;
  const { released, held } = await gateway.stores.jobs.releaseJobs(
    model,
    window,
    (snapshot) => {
      const picks = pickReleases(snapshot, window, snapshotLimits(snapshot));
      roomLeft = windowRoom(snapshot, window) - picks.reduce((sum, pick) => sum + pick.count, 0);
      return picks;
    },
    gateway.now(),
  );
  // In the pass's order; a failed publish leaves the job released and unpublished: the
  // outbox sweep retries it.
  await publishJobs(gateway, released);
  return { released: released.length, held, full: held && roomLeft <= 0 };
}

/** `GANTRY_RELEASE_WINDOW`, or what the model's live agents take at once when that is more. */
export async function releaseWindow(gateway: Gateway, model: string): Promise<number> {
  return Math.max(gateway.config.releaseWindow, await fleetPrefetch(gateway, model));
}

const prefetches = sharedReadings<Map<string, number>>({
  periodMs: (gateway) => gateway.config.queueDepthCacheMs,
});

/**
 * How many jobs of `model` its live agents take from the queue at once (the `prefetch` they
 * registered: their runners' batches and look-ahead), read once per period for every pass.
 * The window grows to it: the jobs in flight between a release and its claim are what keep
 * an agent that reads ahead busy, and a window of 32 capped such a fleet at 32 jobs per
 * release-to-claim trip (measured: 548 jobs/s at saturation against 972 with it lifted).
 */
async function fleetPrefetch(gateway: Gateway, model: string): Promise<number> {
  const byModel = await prefetches.get(gateway, "fleet", async () => {
    const now = gateway.now();
    const sums = new Map<string, number>();
    for (const agent of await gateway.stores.agents.heardFrom(AGENTS_READ)) {
      if (!agent.prefetch || !isLive(agent, now)) continue;
      for (const served of registeredModels(agent)) {
        sums.set(served, (sums.get(served) ?? 0) + agent.prefetch);
      }
    }
    return sums;
  });
  return byModel.get(model) ?? 0;
}

/** `releaseModel`, awaited by a caller whose answer must not fail with it: logged instead. */
export async function releaseSoon(gateway: Gateway, model: string): Promise<void> {
  await releaseModel(gateway, model).catch((error: unknown) => {
    gateway.log.warn({ model, err: String(error) }, "release pass failed; the sweep retries");
  });
}

/** The sweep's pass over every model with held jobs (a missed or failed pass is caught up). */
export async function releaseHeld(gateway: Gateway, limit: number): Promise<number> {
  let released = 0;
  for (const model of await gateway.stores.jobs.heldModels(limit)) {
    released += await releaseModel(gateway, model);
  }
  return released;
}
