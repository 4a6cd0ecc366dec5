import type { Gateway } from "../context.ts";
import type { JobRow } from "../store/job-rows.ts";

/** A checkpoint every this many queued jobs of a model. */
const EVERY = 1_000;
/** The checkpoints serve every reader of the model's line for this long. */
const CHECKPOINTS_MS = 2_000;
/** No single range count reads more index entries than this. */
const BOUND = 5_000;

type Checkpoint = { id: string; priority: number; rank: number };
type Reading = { checkpoints: Checkpoint[]; until: number; loading?: Promise<Checkpoint[]> };
// Keyed by the notifier, which every per-request copy of a gateway shares (rate-limit.ts).
const lines = new WeakMap<object, Map<string, Reading>>();

/** True when checkpoint `c` is ahead of `job` in the order agents take jobs. */
const ahead = (c: Checkpoint, job: Pick<JobRow, "id" | "priority">) =>
  c.priority > job.priority || (c.priority === job.priority && c.id < job.id);

async function checkpoints(gateway: Gateway, model: string): Promise<Checkpoint[]> {
  let byModel = lines.get(gateway.notifier);
  if (!byModel) {
    byModel = new Map();
    lines.set(gateway.notifier, byModel);
  }
  const now = gateway.now();
  const cached = byModel.get(model);
  if (cached && cached.until > now) return cached.checkpoints;
  if (cached?.loading) return cached.checkpoints.length ? cached.checkpoints : cached.loading;
  const loading = gateway.stores.jobs.queueCheckpoints(model, EVERY);
  const table = byModel;
  table.set(model, { checkpoints: cached?.checkpoints ?? [], until: 0, loading });
  const refreshed = loading.then(
    (fresh) => {
      if (table.size > 1_000) table.clear();
      table.set(model, { checkpoints: fresh, until: gateway.now() + CHECKPOINTS_MS });
      return fresh;
    },
    (error: unknown) => {
      table.delete(model);
      throw error;
    },
  );
  // Stale checkpoints are served while fresh ones load: a reader waits only for the first.
  if (cached?.checkpoints.length) {
    gateway.background(refreshed);
    return cached.checkpoints;
  }
  return refreshed;
}

/**
 * How many queued jobs of its model an agent takes before `job`. Exact and live within
 * the first 1 000 of the line (two small index ranges); further back, counted from the
 * nearest checkpoint ahead (every 1 000th queued job, refreshed every 2 s), so a read costs
 * at most about 1 000 index entries however long the line, and may lag the jobs that left
 * the head of the line in the last two seconds.
 */
export async function queuedAhead(gateway: Gateway, job: JobRow): Promise<number> {
  const jobs = gateway.stores.jobs;
  const marks = await checkpoints(gateway, job.model);
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
