import type { PlanLimits } from "../plans.ts";
import { windowRoom } from "../store/release-line.ts";
import type { HeldLane, ReleasePick, ReleaseSnapshot } from "../store/release-snapshot.ts";
import { storedLimits } from "../store/tenants.ts";

/**
 * Which held jobs of a model go to the broker next: the fair order of issue 26, as plain
 * arithmetic over a snapshot of the model's line (gateway/store/job-release.ts).
 *
 * - Room: the model's release window, `window` (which release.ts grows to what the model's
 *   agents read ahead) or as many as its agents run now when that is more (agents that take
 *   many jobs at once get as many), less what is released and not yet taken. A tenant alone
 *   fills it all: no capacity is held back.
 * - Highest priority band first: a pro job never waits behind a free one.
 * - Inside a band, weighted round robin with a short memory: the tenant whose service on the
 *   model, one more counted, divided by its `share_weight`, is least goes next (ties: who
 *   started least recently, then the oldest job). Its service is its running and released
 *   jobs plus its starts among the model's last `RECENT_STARTS` (release-snapshot.ts). At
 *   saturation both grow with a tenant's share, so agents take jobs in proportion to the
 *   weights whatever the backlogs; a tenant that arrives behind another's flood has had none
 *   of the recent starts, and goes first until it has had its weighted part of them (at most
 *   a few hundred starts), instead of waiting a full turn behind every job the flooder has
 *   in flight.
 * - A tenant at `max_running_jobs` (running and released, every model; released jobs of a
 *   paused model aside: release-line.ts `HOLDS_PLACE`) is skipped.
 * - Inside a tenant, its `fairness_key`s the same way, unweighted.
 */
export function pickReleases(
  snapshot: ReleaseSnapshot,
  window: number,
  limitsOf: LimitsOf,
): ReleasePick[] {
  const room = windowRoom(snapshot, window);
  if (room <= 0) return [];
  const picked = new Map<HeldLane, number>();
  let left = room;
  for (const lane of fairTurns(snapshot, limitsOf)) {
    picked.set(lane, (picked.get(lane) ?? 0) + 1);
    if (--left <= 0) break;
  }
  return [...picked].map(([lane, count]) => ({
    priority: lane.priority,
    tenantId: lane.tenantId,
    fairnessKey: lane.fairnessKey,
    count,
    maxActive: limitsOf(lane.tenantId).max_running_jobs,
  }));
}

type LimitsOf = (tenantId: string) => Pick<PlanLimits, "share_weight" | "max_running_jobs">;

/** Each tenant's limits as the snapshot read its plan and overrides. */
export const snapshotLimits =
  (snapshot: ReleaseSnapshot): LimitsOf =>
  (tenantId) =>
    storedLimits(snapshot.tenants.get(tenantId) ?? { plan: "free", limits: null });

/**
 * The snapshot's held jobs in the order the fair release takes them, one lane per job, as
 * long as a lane has jobs left and its tenant is under its limit: what `pickReleases` takes
 * the first window of, and where a held job stands in line (queue-position.ts).
 */
export function* fairTurns(snapshot: ReleaseSnapshot, limitsOf: LimitsOf): Generator<HeldLane> {
  const tenants = new Map<
    string,
    { onModel: number; recent: number; total: number; weight: number; max: number }
  >();
  for (const tenantId of snapshot.tenants.keys()) {
    const limits = limitsOf(tenantId);
    tenants.set(tenantId, {
      onModel: 0,
      recent: 0,
      total: snapshot.tenantActive.get(tenantId) ?? 0,
      weight: limits.share_weight,
      max: limits.max_running_jobs,
    });
  }
  const keyService = new Map<string, number>();
  for (const active of snapshot.active) {
    const tenant = tenants.get(active.tenantId);
    if (tenant) tenant.onModel += active.count;
    const key = laneKey(active.tenantId, active.fairnessKey);
    addTo(keyService, key, active.count);
  }
  // Service: in flight now, plus the recent starts. Ties (equal counts: with few slots, often
  // none running at all) go to whoever started least recently, so equals take turns instead
  // of the oldest backlog winning every one.
  const lastTenant = new Map<string, number>();
  const lastKey = new Map<string, number>();
  for (const start of snapshot.lastStarted) {
    const key = laneKey(start.tenantId, start.fairnessKey);
    lastKey.set(key, Math.max(lastKey.get(key) ?? 0, start.at));
    lastTenant.set(start.tenantId, Math.max(lastTenant.get(start.tenantId) ?? 0, start.at));
    addTo(keyService, key, start.count);
    const tenant = tenants.get(start.tenantId);
    if (tenant) tenant.recent += start.count;
  }
  let turn = Number.MAX_SAFE_INTEGER / 2;
  const lanes = snapshot.lanes
    .filter((lane) => tenants.has(lane.tenantId))
    .map((lane) => ({ lane, left: lane.held }));
  while (true) {
    const open = lanes.filter((l) => l.left > 0 && underLimit(tenants.get(l.lane.tenantId)));
    if (open.length === 0) break;
    const band = Math.max(...open.map((l) => l.lane.priority));
    const inBand = open.filter((l) => l.lane.priority === band);
    // Where the tenant would stand with one more: (n + 1) / weight, the next job's virtual
    // finish in weighted fair queuing. n / weight would tie a light tenant with a heavy one
    // at every turn and hand the tie to the lighter (measured: 1:2:4 ran as 2:2:4).
    const share = (l: (typeof inBand)[number]) => {
      const tenant = tenants.get(l.lane.tenantId);
      return tenant ? (tenant.onModel + tenant.recent + 1) / tenant.weight : 0;
    };
    const tenantLane = minBy(inBand, share, (l) => lastTenant.get(l.lane.tenantId) ?? 0);
    const ownLanes = inBand.filter((l) => l.lane.tenantId === tenantLane.lane.tenantId);
    const chosen = minBy(
      ownLanes,
      (l) => keyService.get(keyOf(l.lane)) ?? 0,
      (l) => lastKey.get(keyOf(l.lane)) ?? 0,
    );
    // Picked now: later than any start, for the ties of the rest of this pass.
    turn++;
    lastTenant.set(chosen.lane.tenantId, turn);
    lastKey.set(keyOf(chosen.lane), turn);
    chosen.left--;
    addTo(keyService, keyOf(chosen.lane), 1);
    const tenant = tenants.get(chosen.lane.tenantId);
    if (tenant) {
      tenant.onModel++;
      tenant.total++;
    }
    yield chosen.lane;
  }
}

const addTo = (counts: Map<string, number>, key: string, n: number) =>
  counts.set(key, (counts.get(key) ?? 0) + n);

const underLimit = (tenant: { total: number; max: number } | undefined) =>
  tenant !== undefined && tenant.total < tenant.max;

const laneKey = (tenantId: string, fairnessKey: string | null) =>
  `${tenantId}\u0000${fairnessKey ?? ""}`;
const keyOf = (lane: HeldLane) => laneKey(lane.tenantId, lane.fairnessKey);

/**
 * The item with the lowest `score`; ties go to the lowest `last` (served least recently),
 * then to the lane whose oldest job is oldest.
 */
function minBy<T extends { lane: HeldLane }>(
  items: T[],
  score: (item: T) => number,
  last: (item: T) => number,
): T {
  let best = items[0] as T;
  for (const item of items.slice(1)) {
    const [a, b] = [score(item), score(best)];
    const [la, lb] = [last(item), last(best)];
    if (a < b || (a === b && (la < lb || (la === lb && item.lane.oldestId < best.lane.oldestId))))
      best = item;
  }
  return best;
}
