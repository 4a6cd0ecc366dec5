import type { Kysely, UpdateQueryBuilder, UpdateResult } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import type { JobError, JobStatus } from "../../shared/protocol/index.ts";
import { byId } from "./job-reads.ts";
import type { JobRow, Transition } from "./job-rows.ts";
import { lostRunChange, type RunUsage, runUsageChange } from "./usage.ts";

/**
 * The JobStore's state changes: one plain function per change. Every one is a conditional
 * UPDATE … RETURNING that also bumps `last_seq`; a database trigger appends its event in the
 * same statement (migration 0005). No interactive transactions, because D1 has none; the
 * condition in the UPDATE is what keeps concurrent agents and clients from racing.
 */

type Db = Kysely<Database>;
type JobUpdate = UpdateQueryBuilder<Database, "jobs", "jobs", UpdateResult>;

const ACTIVE: JobStatus[] = ["queued", "running"];
/** What `POST /v1/jobs/{id}/retry` may put back in the queue. */
const RETRYABLE: JobStatus[] = ["failed", "expired", "canceled"];

/** The running attempt `attempt`, held by `agentId` when one is named. */
function currentAttempt(query: JobUpdate, attempt: number, agentId?: string): JobUpdate {
  const running = query.where("status", "=", "running").where("attempt", "=", attempt);
  return agentId === undefined ? running : running.where("agent_id", "=", agentId);
}

/**
 * Takes a stale running job back: to `queued` (unpublished, so the outbox covers a failed
 * republish) when `retry`, else to `failed`. Only if no heartbeat came in since `staleBefore`
 * and the attempt is still the one judged stale: a racing heartbeat or claim wins.
 */
export function reclaimStale(
  db: Db,
  row: JobRow,
  staleBefore: number,
  error: JobError,
  retry: boolean,
  now: number,
): Promise<Transition> {
  const change = retry
    ? { status: "queued", error: JSON.stringify(error), published_at: null }
    : { status: "failed", error: JSON.stringify(error), finished_at: now };
  return transition(
    db,
    row.id,
    change,
    now,
    (q) =>
      q
        .where("status", "=", "running")
        .where("attempt", "=", row.attempt)
        .where("updated_at", "<", staleBefore),
    lostRunChange(),
  );
}

export function failQueued(db: Db, row: JobRow, error: JobError, now: number): Promise<Transition> {
  const change = { status: "failed", error: JSON.stringify(error), finished_at: now };
  return transition(db, row.id, change, now, (q) =>
    q.where("status", "=", "queued").where("last_seq", "=", row.last_seq),
  );
}

export function retry(
  db: Db,
  tenantId: string,
  id: string,
  now: number,
  expiresAt: number,
  held = false,
): Promise<Transition> {
  const fresh = {
    status: "queued",
    attempt: 0,
    agent_id: null,
    output: null,
    error: null,
    started_at: null,
    finished_at: null,
    published_at: null,
    released_at: held ? null : now,
    expires_at: expiresAt,
    progress: null,
  };
  return transition(db, id, fresh, now, (q) =>
    q.where("tenant_id", "=", tenantId).where("status", "in", RETRYABLE),
  );
}

export function cancel(db: Db, tenantId: string, id: string, now: number): Promise<Transition> {
  return transition(db, id, { status: "canceled", finished_at: now }, now, (q) =>
    q.where("tenant_id", "=", tenantId).where("status", "in", ACTIVE),
  );
}

export function expire(db: Db, id: string, now: number): Promise<Transition> {
  return transition(db, id, { status: "expired", finished_at: now }, now, (q) =>
    q.where("status", "=", "queued").where("expires_at", "<", now),
  );
}

/**
 * An agent takes the job for delivery `attempt`. A queued job, or a running one whose
 * earlier attempt was lost (its agent died and the queue redelivered), can be claimed.
 */
export function claim(
  db: Db,
  id: string,
  agentId: string,
  attempt: number,
  now: number,
  models?: readonly string[],
): Promise<Transition> {
  return transition(
    db,
    id,
    { status: "running", attempt, agent_id: agentId, started_at: now, error: null },
    now,
    (q) => {
      const claimable = q.where("expires_at", ">=", now).where((eb) =>
        eb.or([
          // Only a released job: a held one's old message (a stale attempt's, redelivered)
          // must not start it past its tenant's `max_running_jobs` (job-release.ts).
          eb.and([eb("status", "=", "queued"), eb("released_at", "is not", null)]),
          eb.and([eb("status", "=", "running"), eb("attempt", "<", attempt)]),
        ]),
      );
      return models ? claimable.where("model", "in", [...models]) : claimable;
    },
    // Taking over a running attempt: its agent is gone with its run's report.
    lostRunChange(),
  );
}

export function succeed(
  db: Db,
  id: string,
  attempt: number,
  output: unknown,
  now: number,
  agentId?: string,
  run?: RunUsage,
): Promise<Transition> {
  return transition(
    db,
    id,
    { status: "succeeded", output: JSON.stringify(output ?? null), finished_at: now },
    now,
    (q) => currentAttempt(q, attempt, agentId),
    runUsageChange(run),
  );
}

/** A failed attempt: back to `queued` when the queue will retry it, else `failed`. */
export function fail(
  db: Db,
  id: string,
  attempt: number,
  error: JobError,
  willRetry: boolean,
  now: number,
  agentId?: string,
  run?: RunUsage,
): Promise<Transition> {
  const change = willRetry
    ? { status: "queued", error: JSON.stringify(error) }
    : { status: "failed", error: JSON.stringify(error), finished_at: now };
  return transition(
    db,
    id,
    change,
    now,
    (q) => currentAttempt(q, attempt, agentId),
    runUsageChange(run),
  );
}

export function release(
  db: Db,
  id: string,
  attempt: number,
  now: number,
  agentId?: string,
  run?: RunUsage,
): Promise<Transition> {
  const settle = (q: JobUpdate) => currentAttempt(q, attempt, agentId);
  return transition(db, id, { status: "queued" }, now, settle, runUsageChange(run));
}

async function transition(
  db: Db,
  id: string,
  change: Partial<Omit<JobRow, "id" | "last_seq">>,
  now: number,
  condition: (query: JobUpdate) => JobUpdate,
  /** A run's usage rides in the same UPDATE: its trigger rolls it up (migration 0022). */
  usage: ReturnType<typeof runUsageChange> | ReturnType<typeof lostRunChange> = {},
): Promise<Transition> {
  const base = db
    .updateTable("jobs")
    .set((eb) => ({ ...change, ...usage, updated_at: now, last_seq: eb("last_seq", "+", 1) }))
    .where("id", "=", id);
  const row = await condition(base).returningAll().executeTakeFirst();
  if (!row) return { ok: false, current: (await byId(db, id)) ?? null };
  return { ok: true, job: row };
}
