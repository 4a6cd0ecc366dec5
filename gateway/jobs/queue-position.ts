import type { Gateway } from "../context.ts";
import type { JobRow } from "../store/job-rows.ts";
import { fairTurns, snapshotLimits } from "./fair-order.ts";
import { sharedReadings } from "./shared-readings.ts";

/** A checkpoint every this many queued jobs of a model. */
const EVERY = 1_000;
/** The checkpoints serve every reader of the model's line for this long. */
const CHECKPOINTS_MS = 2_000;
/** No single range count reads more index entries than this. */
const BOUND = 5_000;
/**
 * How far the fair line is followed: a held job further back is placed by age, so a poll of
 * one reads at most this many of its lane's ids, as a checkpoint bounds the count by age.
 */
const TURNS = EVERY;
/**
 * Lanes weighed over all the turns followed, at most: each turn weighs every lane (as a
 * release pass does for its few), so a line of 5 000 lanes (a tenant's fairness_keys) took
 * 1.8 s to follow 1 000 turns; it is followed 4 turns deep instead, about 10 ms.
 */
const LANE_TURNS = 20_000;

type Checkpoint = { id: string; priority: number; rank: number };

const lines = sharedReadings<Checkpoint[]>({ periodMs: CHECKPOINTS_MS });

/** True when checkpoint `c` is ahead of `job` in the order agents take jobs. */
const ahead = (c: Checkpoint, job: Pick<JobRow, "id" | "priority">) =>
  c.priority > job.priority || (c.priority === job.priority && c.id < job.id);

/**
 * How many queued jobs of its model an agent takes before `job`: by age (`aheadByAge`),
 * then placed in the fair order where several tenants or keys wait (`fairPlaces`).
 */
export async function queuedAhead(gateway: Gateway, job: JobRow): Promise<number> {
  const byAge = new Map([[job.id, await aheadByAge(gateway, job)]]);
  return (await fairPlaces(gateway, [job], byAge)).get(job.id) ?? 0;
}

/**
 * How many queued jobs of its model come before `job` by priority, then age: the order of
 * one lane (one band, tenant and key). Exact and live within
 * the first 1 000 of the line (two small index ranges); further back, counted from the
 * nearest checkpoint ahead (every 1 000th queued job, refreshed every 2 s), so a read costs
 * at most about 1 000 index entries however long the line, and may lag the jobs that left
 * the head of the line in the last two seconds.
 */
async function aheadByAge(gateway: Gateway, job: JobRow): Promise<number> {
  const jobs = gateway.stores.jobs;
  const marks = await lines.get(gateway, job.model, () => jobs.queueCheckpoints(job.model, EVERY));
  let nearest: Checkpoint | undefined;
  for (const mark of marks) {
    if (!ahead(mark, job)) break;
    nearest = mark;
  }
  const model = job.model;
  if (!nearest) {
    const [higher, older] = await Promise.all([
      jobs.countQueued(model, { priorityAbove: job.priority, priorityBelow: 10 }, BOUND),
      jobs.countQueued(model, { priority: job.priority, beforeId: job.id }, BOUND),
    ]);
    return higher + older;
  }
  if (nearest.priority === job.priority) {
    const between = await jobs.countQueued(
      model,
      { priority: job.priority, afterId: nearest.id, beforeId: job.id },
      BOUND,
    );
    return nearest.rank + between;
  }
  const [rest, bands, own] = await Promise.all([
    jobs.countQueued(model, { priority: nearest.priority, afterId: nearest.id }, BOUND),
    jobs.countQueued(
      model,
      { priorityAbove: job.priority, priorityBelow: nearest.priority },
      BOUND,
    ),
    jobs.countQueued(model, { priority: job.priority, beforeId: job.id }, BOUND),
  ]);
  return nearest.rank + rest + bands + own;
}

/**
 * `queuedAhead` of each of a listing page's queued jobs, by id: per band (model and
 * priority), the first job of the band in line order is placed as `queuedAhead` places one
 * job, and the others by one index range from it to the last (the band's queued jobs between
 * them). A page then costs a few reads, not one to three per job. A band whose range holds
 * more than `BOUND` jobs (a page of jobs far apart in the line) is placed job by job.
 */
export async function queuedAheadMany(
  gateway: Gateway,
  rows: readonly JobRow[],
): Promise<Map<string, number>> {
  const bands = new Map<string, JobRow[]>();
  for (const row of rows) {
    const key = `${row.model}\n${row.priority}`;
    const band = bands.get(key);
    if (band) band.push(row);
    else bands.set(key, [row]);
  }
  const byAge = new Map<string, number>();
  await Promise.all(
    [...bands.values()].map(async (band) => {
      band.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      const first = band[0];
      const last = band.at(-1);
      if (!first || !last) return;
      const [base, between] = await Promise.all([
        aheadByAge(gateway, first),
        band.length > 1
          ? gateway.stores.jobs.queuedIdsInBand(
              first.model,
              { priority: first.priority, fromId: first.id, toId: last.id },
              BOUND + 1,
            )
          : Promise.resolve([first.id]),
      ]);
      if (between.length > BOUND) {
        const each = await Promise.all(band.map((row) => aheadByAge(gateway, row)));
        band.forEach((row, i) => {
          byAge.set(row.id, each[i] ?? 0);
        });
        return;
      }
      // `between` is in line order and starts at `first`: a job's index in it is how many
      // of the band's queued jobs from `first` on come before it by age.
      let index = 0;
      for (const row of band) {
        while (index < between.length && (between[index] as string) < row.id) index++;
        byAge.set(row.id, base + index);
      }
    }),
  );
  return fairPlaces(gateway, rows, byAge);
}

type Lane = { priority: number; tenantId: string; fairnessKey: string | null };

/** A lane of held jobs: one band, tenant and `fairness_key` of a model. */
const laneOf = (row: JobRow): Lane => ({
  priority: row.priority,
  tenantId: row.tenant_id,
  fairnessKey: row.fairness_key,
});
const laneKey = (lane: Lane) =>
  `${lane.priority}\u0000${lane.tenantId}\u0000${lane.fairnessKey ?? ""}`;

/** The first turns of a model's fair line, read once per period for every reader. */
interface FairLine {
  /** Released jobs not yet taken: ahead of every held job. */
  released: number;
  /** Lanes (band, tenant, key) with held jobs. */
  lanes: number;
  /** Per lane, the place in the held line of its oldest job's turn, its next one's, …. */
  turns: Map<string, number[]>;
  /** Where the turns stopped with jobs left (a held job not among them is behind them all). */
  cut: number | null;
}

// Its read groups every held job of the model (as a release pass does): every 2 s by
// default, as the checkpoints are, and afresh where the counts are (a period of 0).
const fairLines = sharedReadings<FairLine>({
  periodMs: (gateway) => 2 * gateway.config.queueDepthCacheMs,
});

/**
 * The release's own order (fair-order.ts) over the model's held jobs, as far as `TURNS`
 * turns (fewer with many lanes: `LANE_TURNS`), ignoring `max_running_jobs`: a tenant held
 * by its limit says so as its reason, and its place is where it stands once it may run again.
 */
async function readFairLine(gateway: Gateway, model: string): Promise<FairLine> {
  const snapshot = await gateway.stores.line.snapshot(model, gateway.now(), TURNS);
  const turns = new Map<string, number[]>();
  const followed = Math.max(1, Math.min(TURNS, Math.floor(LANE_TURNS / snapshot.lanes.length)));
  let turn = 0;
  if (snapshot.lanes.length > 1) {
    const limits = snapshotLimits(snapshot);
    const unlimited = (tenantId: string) => ({
      ...limits(tenantId),
      max_running_jobs: Number.POSITIVE_INFINITY,
    });
    for (const lane of fairTurns(snapshot, unlimited)) {
      const key = laneKey(lane);
      const places = turns.get(key);
      if (places) places.push(turn);
      else turns.set(key, [turn]);
      if (++turn >= followed) break;
    }
  }
  const cut = turn >= followed ? turn : null;
  return { released: snapshot.released, lanes: snapshot.lanes.length, turns, cut };
}

/**
 * The jobs' places in the fair order, by id, from their places by age. One lane waiting:
 * the same. A released job waits only for the released jobs ahead of it. A held one waits
 * for every released job and the turns the fair release gives before its own: the turn of
 * its lane that takes it (a lane's jobs go oldest first), one read of the lane's ids per
 * lane. Past the turns followed, by age, but never ahead of them.
 */
async function fairPlaces(
  gateway: Gateway,
  rows: readonly JobRow[],
  byAge: ReadonlyMap<string, number>,
): Promise<Map<string, number>> {
  const models = [...new Set(rows.map((row) => row.model))];
  const lines = new Map(
    await Promise.all(
      models.map(async (model) => {
        const line = await fairLines.get(gateway, model, () => readFairLine(gateway, model));
        return [model, line] as const;
      }),
    ),
  );
  const placed = new Map<string, number>();
  const lanes = new Map<string, JobRow[]>();
  for (const row of rows) {
    const age = byAge.get(row.id) ?? 0;
    const line = lines.get(row.model);
    placed.set(row.id, age);
    if (!line || line.lanes <= 1) continue;
    if (row.released_at !== null) {
      placed.set(row.id, Math.min(age, Math.max(0, line.released - 1)));
      continue;
    }
    const key = `${row.model}\u0000${laneKey(laneOf(row))}`;
    const lane = lanes.get(key);
    if (lane) lane.push(row);
    else lanes.set(key, [row]);
  }
  await Promise.all(
    [...lanes.values()].map(async (lane) => {
      const head = lane[0] as JobRow;
      const line = lines.get(head.model);
      if (!line) return;
      // Further back than the turns followed: behind all of them.
      const behind = (row: JobRow) =>
        placed.set(row.id, Math.max(byAge.get(row.id) ?? 0, line.released + (line.cut ?? 0)));
      const places = line.turns.get(laneKey(laneOf(head)));
      if (!places) {
        if (line.cut !== null) lane.forEach(behind);
        return;
      }
      const last =
        lane
          .map((row) => row.id)
          .sort()
          .at(-1) ?? head.id;
      const ids = await gateway.stores.line.heldIdsInLane(
        head.model,
        { ...laneOf(head), toId: last },
        places.length,
      );
      for (const row of lane) {
        const turn = places[ids.indexOf(row.id)];
        if (turn !== undefined) placed.set(row.id, line.released + turn);
        // The lane's ids ran past its turns: the job is not among them but behind them.
        else if (line.cut !== null && ids.length === places.length) behind(row);
      }
    }),
  );
  return placed;
}
