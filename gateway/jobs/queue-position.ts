import type { Gateway } from "../context.ts";
import type { JobRow } from "../store/job-rows.ts";
import { sharedReadings } from "./shared-readings.ts";

/** A checkpoint every this many queued jobs of a model. */
const EVERY = 1_000;
/** The checkpoints serve every reader of the model's line for this long. */
const CHECKPOINTS_MS = 2_000;
/** No single range count reads more index entries than this. */
const BOUND = 5_000;

type Checkpoint = { id: string; priority: number; rank: number };

const lines = sharedReadings<Checkpoint[]>({ periodMs: CHECKPOINTS_MS });

/** True when checkpoint `c` is ahead of `job` in the order agents take jobs. */
const ahead = (c: Checkpoint, job: Pick<JobRow, "id" | "priority">) =>
  c.priority > job.priority || (c.priority === job.priority && c.id < job.id);

/**
 * How many queued jobs of its model an agent takes before `job`. Exact and live within
 * the first 1 000 of the line (two small index ranges); further back, counted from the
 * nearest checkpoint ahead (every 1 000th queued job, refreshed every 2 s), so a read costs
 * at most about 1 000 index entries however long the line, and may lag the jobs that left
 * the head of the line in the last two seconds.
 */
export async function queuedAhead(gateway: Gateway, job: JobRow): Promise<number> {
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
  const placed = new Map<string, number>();
  await Promise.all(
    [...bands.values()].map(async (band) => {
      band.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      const first = band[0];
      const last = band.at(-1);
      if (!first || !last) return;
      const [base, between] = await Promise.all([
        queuedAhead(gateway, first),
        band.length > 1
          ? gateway.stores.jobs.queuedIdsInBand(
              first.model,
              { priority: first.priority, fromId: first.id, toId: last.id },
              BOUND + 1,
            )
          : Promise.resolve([first.id]),
      ]);
      if (between.length > BOUND) {
        const each = await Promise.all(band.map((row) => queuedAhead(gateway, row)));
        band.forEach((row, i) => {
          placed.set(row.id, each[i] ?? 0);
        });
        return;
      }
      // `between` is in line order and starts at `first`: a job's index in it is how many
      // of the band's queued jobs from `first` on an agent takes before it.
      let index = 0;
      for (const row of band) {
        while (index < between.length && (between[index] as string) < row.id) index++;
        placed.set(row.id, base + index);
      }
    }),
  );
  return placed;
}
