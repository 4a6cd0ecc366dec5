import { type Kysely, type RawBuilder, sql } from "kysely";
import type { Database } from "../../shared/db/schema.ts";
import type { JobError, JobStatus } from "../../shared/protocol/index.ts";
import { boundList } from "./bound-list.ts";
import { isPostgresDb } from "./job-metadata.ts";
import { byId } from "./job-reads.ts";
import type { JobRow, Transition } from "./job-rows.ts";
import { lostRunChange, type RunUsage, runUsageChange } from "./usage.ts";

/**
 * The JobStore's state changes: one plain function per change. Every one is a conditional
 * UPDATE … RETURNING that also bumps `last_seq`; a database trigger appends its event in the
 * same statement (migration 0005). No interactive transactions, because D1 has none; the
 * condition in the UPDATE is what keeps concurrent agents and clients from racing.
 *
 * Written as SQL text with bound values rather than with Kysely's builder: the claims and
 * reports of ordinary load come one by one, and building each UPDATE node by node took a
 * twentieth of the gateway's CPU at 200 jobs/s (issue 29). The values stay parameters, as
 * the builder sent them, so Postgres plans the same statements the same way.
 */

type Db = Kysely<Database>;
type Condition = RawBuilder<unknown>;

const ACTIVE: JobStatus[] = ["queued", "running"];
/** What `POST /v1/jobs/{id}/retry` may put back in the queue. */
const RETRYABLE: JobStatus[] = ["failed", "expired", "canceled"];

/** `IN` and its list; an empty list is matched by nothing (`IN ()` is no SQL on Postgres). */
const among = (values: readonly unknown[]) =>
  values.length ? sql`IN (${sql.join([...values])})` : sql`IN (SELECT NULL WHERE 1 = 0)`;

/** The running attempt `attempt`, held by `agentId` when one is named. */
function currentAttempt(attempt: number, agentId?: string): Condition {
  const running = sql`status = ${"running"} AND attempt = ${attempt}`;
  return agentId === undefined ? running : sql`${running} AND agent_id = ${agentId}`;
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
    sql`status = ${"running"} AND attempt = ${row.attempt} AND updated_at < ${staleBefore}`,
    lostRunChange(),
  );
}

export function failQueued(db: Db, row: JobRow, error: JobError, now: number): Promise<Transition> {
  const change = { status: "failed", error: JSON.stringify(error), finished_at: now };
  const unchanged = sql`status = ${"queued"} AND last_seq = ${row.last_seq}`;
  return transition(db, row.id, change, now, unchanged);
}

/** What a retry sets: a new life, queued, its deadline aside (`expires_at`). */
const freshLife = (now: number, held: boolean) => ({
  status: "queued",
  attempt: 0,
  agent_id: null,
  output: null,
  error: null,
  started_at: null,
  finished_at: null,
  published_at: null,
  released_at: held ? null : now,
  progress: null,
});

export function retry(
  db: Db,
  tenantId: string,
  id: string,
  now: number,
  expiresAt: number,
  held = false,
): Promise<Transition> {
  const fresh = { ...freshLife(now, held), expires_at: expiresAt };
  const ended = sql`tenant_id = ${tenantId} AND status ${among(RETRYABLE)}`;
  return transition(db, id, fresh, now, ended);
}

/**
 * `retry` (held) for the failed, expired or canceled jobs among `lives`, each with its own
 * deadline, in one UPDATE whatever their number: the pairs one bound JSON array on SQLite
 * and D1, arrays on Postgres (rows locked in id order first, as `endMany`'s). An operator's
 * redrive: of every tenant. Returns the jobs it put back, in id order.
 */
export async function retryMany(
  db: Db,
  lives: readonly { id: string; expiresAt: number }[],
  now: number,
): Promise<JobRow[]> {
  if (lives.length === 0) return [];
  const ids = lives.map((life) => life.id);
  const sets = Object.entries({ ...freshLife(now, true), updated_at: now }).map(
    ([column, value]) => sql`${sql.ref(column)} = ${value}`,
  );
  const query = isPostgresDb(db)
    ? sql`UPDATE jobs SET ${sql.join(sets)}, last_seq = last_seq + 1, expires_at = b.expires_at
        FROM unnest(${ids}::text[], ${lives.map((life) => life.expiresAt)}::bigint[])
          AS b(id, expires_at)
        WHERE jobs.id = b.id AND jobs.status ${among(RETRYABLE)} AND jobs.id = ANY(ARRAY(
          SELECT id FROM jobs WHERE id ${boundList(db, ids)} ORDER BY id FOR UPDATE))
        RETURNING jobs.*`
    : sql`UPDATE jobs SET ${sql.join(sets)}, last_seq = last_seq + 1, expires_at = (
          SELECT json_extract(value, '$[1]') FROM json_each(${pairs(lives)})
          WHERE json_extract(value, '$[0]') = jobs.id)
        WHERE id ${boundList(db, ids)} AND status ${among(RETRYABLE)} RETURNING *`;
  const { rows } = await query.$castTo<JobRow>().execute(db);
  return rows.sort((a, b) => (a.id < b.id ? -1 : 1));
}

const pairs = (lives: readonly { id: string; expiresAt: number }[]) =>
  JSON.stringify(lives.map((life) => [life.id, life.expiresAt]));

export function cancel(db: Db, tenantId: string, id: string, now: number): Promise<Transition> {
  const active = sql`tenant_id = ${tenantId} AND status ${among(ACTIVE)}`;
  return transition(db, id, { status: "canceled", finished_at: now }, now, active);
}

/**
 * The queued and running jobs among `ids` (of `tenantId`, when named) to `canceled`, in one
 * UPDATE whatever their number (`endMany`). Returns the jobs it canceled.
 */
export function cancelMany(db: Db, ids: readonly string[], now: number, tenantId?: string) {
  const tenant = tenantId === undefined ? sql`` : sql` AND tenant_id = ${tenantId}`;
  return endMany(db, ids, "canceled", now, sql`status ${among(ACTIVE)}${tenant}`);
}

/** The overdue queued jobs among `ids` to `expired`, in one UPDATE (`endMany`). */
export function expireMany(db: Db, ids: readonly string[], now: number) {
  return endMany(db, ids, "expired", now, sql`status = ${"queued"} AND expires_at < ${now}`);
}

/**
 * The jobs among `ids` that meet `condition` ended with `status`, in one UPDATE whatever
 * their number (`boundList`); on Postgres the rows are locked in id order first, as every
 * multi-row change's are (job-batch-updates.ts). The
 * trigger appends each job's event, as for one. Returns the jobs it ended, in id order.
 */
async function endMany(
  db: Db,
  ids: readonly string[],
  status: "canceled" | "expired",
  now: number,
  condition: Condition,
): Promise<JobRow[]> {
  if (ids.length === 0) return [];
  const among = boundList(db, ids);
  const picked = isPostgresDb(db)
    ? sql`id = ANY(ARRAY(SELECT id FROM jobs WHERE id ${among} ORDER BY id FOR UPDATE))`
    : sql`id ${among}`;
  const { rows } = await sql<JobRow>`UPDATE jobs
    SET status = ${status}, finished_at = ${now}, updated_at = ${now}, last_seq = last_seq + 1
    WHERE ${picked} AND ${condition} RETURNING *`.execute(db);
  return rows.sort((a, b) => (a.id < b.id ? -1 : 1));
}

export function expire(db: Db, id: string, now: number): Promise<Transition> {
  const overdue = sql`status = ${"queued"} AND expires_at < ${now}`;
  return transition(db, id, { status: "expired", finished_at: now }, now, overdue);
}

/** Of one of `models` when given; a running job only if not heard from since `takeoverBefore`. */
export type ClaimScope = [models?: readonly string[], takeoverBefore?: number];

/**
 * An agent takes the job for delivery `attempt`. A queued job, or a running one whose
 * earlier attempt was lost (its agent died and the queue redelivered), can be claimed; with
 * `takeoverBefore`, a running one only if not heard from since then (`takeoverCondition`).
 */
export function claim(
  db: Db,
  id: string,
  agentId: string,
  attempt: number,
  now: number,
  models?: readonly string[],
  takeoverBefore?: number,
): Promise<Transition> {
  // Only a released job: a held one's old message (a stale attempt's, redelivered) must not
  // start it past its tenant's `max_running_jobs` (job-release.ts).
  const claimable = sql`expires_at >= ${now}
    AND ((status = ${"queued"} AND released_at IS NOT NULL)
      OR (status = ${"running"} AND attempt < ${attempt}${takeoverCondition("updated_at", takeoverBefore)}))`;
  return transition(
    db,
    id,
    { status: "running", attempt, agent_id: agentId, started_at: now, error: null },
    now,
    models ? sql`${claimable} AND model ${among(models)}` : claimable,
    // Taking over a running attempt: its agent is gone with its run's report.
    lostRunChange(),
  );
}

/**
 * A running attempt's agent that was heard from (its claim, a heartbeat) since `before` is
 * alive: a higher delivery count is then another message of the job, not its lost one
 * redelivered (the sweeper republished a silent agent's job while the queue still held the
 * first message), and must not start a second run beside it.
 */
export function takeoverCondition(column: string, before: number | undefined): Condition {
  return before === undefined ? sql`` : sql` AND ${sql.ref(column)} < ${before}`;
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
    currentAttempt(attempt, agentId),
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
  return transition(db, id, change, now, currentAttempt(attempt, agentId), runUsageChange(run));
}

export function release(
  db: Db,
  id: string,
  attempt: number,
  now: number,
  agentId?: string,
  run?: RunUsage,
): Promise<Transition> {
  const settle = currentAttempt(attempt, agentId);
  return transition(db, id, { status: "queued" }, now, settle, runUsageChange(run));
}

async function transition(
  db: Db,
  id: string,
  change: Partial<Omit<JobRow, "id" | "last_seq">>,
  now: number,
  condition: Condition,
  /** A run's usage rides in the same UPDATE: its trigger rolls it up (migration 0022). */
  usage: ReturnType<typeof runUsageChange> | ReturnType<typeof lostRunChange> = {},
): Promise<Transition> {
  // A value is bound, or written out where it is SQL (`usage`'s sums: `gpu_ms + 12`).
  // Absent values are left alone, as the builder left them.
  const sets = Object.entries({ ...change, ...usage, updated_at: now })
    .filter(([, value]) => value !== undefined)
    .map(([column, value]) => sql`${sql.ref(column)} = ${value}`);
  const { rows } = await sql<JobRow>`UPDATE jobs SET ${sql.join(sets)}, last_seq = last_seq + 1
    WHERE id = ${id} AND ${condition} RETURNING *`.execute(db);
  const row = rows[0];
  if (!row) return { ok: false, current: (await byId(db, id)) ?? null };
  return { ok: true, job: row };
}
