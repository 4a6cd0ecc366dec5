import { type Kysely, type RawBuilder, sql } from "kysely";
import { PLAN_EACH_CALL } from "../../shared/db/pg-prepared.ts";
import type { Database } from "../../shared/db/schema.ts";
import { naturalBatcher } from "../../shared/natural-batch.ts";
import { isPostgresDb } from "./job-metadata.ts";
import { JOB_COLUMNS, type JobRow } from "./job-rows.ts";
import { takeoverCondition } from "./job-transitions.ts";
import { lostRunChange, type RunUsage } from "./usage.ts";

/**
 * State changes of many jobs in one statement: what an agent's batched claims and reports
 * become. One `UPDATE … FROM (rows) … RETURNING` instead of one statement and one commit
 * per job; on Postgres that is an order of magnitude less work per job for the database and
 * for the gateway's driver. The conditions are the single-job ones (job-transitions.ts), row by
 * row; a job that does not meet them is simply not returned, and the caller settles it
 * alone, which also says why.
 *
 * The rows are a table `b`, their columns named apart from `jobs`' so that `RETURNING` lists
 * `jobs`' own unambiguously: a `SELECT … UNION ALL` (SQLite's VALUES cannot name its
 * columns), or on Postgres, for a batch of more than `PLANNED_BATCH` jobs, one array per
 * column, `unnest`ed. Postgres plans a statement per text: the `UNION ALL` of a 100-job
 * batch took it 10–15 ms to plan, more than to run, again on most calls (pg_stat_statements
 * during bench/backlog.ts: 25 plans for 25 calls, 364 ms), where the arrays plan like a
 * one-job statement. Small batches, the common case at ordinary load, keep their rows: each
 * size is a text of its own that Postgres settles on a plan for, where the arrays of a small
 * batch were planned anew on most calls (the batch's size moving its cost).
 *
 * On Postgres, statements that change several rows take their row locks in id order (or
 * skip locked rows, where that is harmless): two of them locking the same jobs in different
 * orders would deadlock, and Postgres takes a second (`deadlock_timeout`) to notice and
 * fail one. SQLite has one writer at a time and no such thing.
 */

const returningJob = sql.join(JOB_COLUMNS.map((column) => sql.ref(column)));

/**
 * The claims and reports join their batch to `jobs`, and only a plan made for the batch at
 * hand knows how many rows it holds (see `PLAN_EACH_CALL`): a generic plan joins them as if
 * ten, re-reading the batch once per job. Planning costs Postgres about 0.6 ms a call, which
 * that re-reading costs (about 1 µs a row read) for a batch of some 25 jobs.
 */
const PLANNED_BATCH = 32;

/** Whether a batch of `rows` jobs goes as arrays (Postgres, a large batch; see above). */
const asArrays = (db: Kysely<Database>, rows: number) => rows > PLANNED_BATCH && isPostgresDb(db);

/** A batch that goes as arrays is planned for its size; one written out keeps its plan. */
const plannedFor = (db: Kysely<Database>, rows: number) =>
  sql.raw(asArrays(db, rows) ? PLAN_EACH_CALL : "");

/** One column of a batch: its name in `b`, its SQL type and a value per row. */
interface BatchColumn {
  name: string;
  type: "text" | "integer";
  values: readonly (string | number | null)[];
}

/** The batch as a table `b`: arrays, or `SELECT … UNION ALL` (see above). */
function rowsTable(db: Kysely<Database>, columns: readonly BatchColumn[]): RawBuilder<unknown> {
  const rows = columns[0]?.values.length ?? 0;
  if (asArrays(db, rows)) {
    const names = sql.join(columns.map((column) => sql.ref(column.name)));
    const arrays = columns.map((column) => sql`${[...column.values]}::${sql.raw(column.type)}[]`);
    return sql`unnest(${sql.join(arrays)}) AS b(${names})`;
  }
  const selects = Array.from(
    { length: rows },
    (_, i) =>
      sql`SELECT ${sql.join(
        columns.map(
          (column) =>
            sql`CAST(${column.values[i] ?? null} AS ${sql.raw(column.type)}) AS ${sql.ref(column.name)}`,
        ),
      )}`,
  );
  return sql`(${sql.join(selects, sql` UNION ALL `)}) AS b`;
}

/** Splits `items` so that no statement carries more than `maxParameters` parameters. */
function chunks<T>(items: readonly T[], perItem: number, fixed: number, maxParameters: number) {
  const size = Math.max(1, Math.floor((maxParameters - fixed) / perItem));
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * `jobs.<column>` read so that no index can serve a condition on it (`status || ''`,
 * `expires_at + 0`). These statements find their rows by id, through the batch and the
 * lock subquery; a condition on an indexed column (status, model, expires_at) offers the
 * planner a second path, and with statistics from before a backlog (the last ANALYZE saw
 * almost no queued jobs) it costs that path at one row and takes it. Measured during
 * bench/backlog.ts on Postgres: a 200-job claim scanned 88 000 queued rows once per id,
 * 11 s, against 27 ms by id. The same SQL runs on SQLite and D1, where it costs nothing.
 */
const bare = (column: "status" | "model" | "expires_at") =>
  column === "expires_at" ? sql`(jobs.expires_at + 0)` : sql`(${sql.ref(`jobs.${column}`)} || '')`;

/**
 * `jobs.id` among `ids`, with those rows locked in id order first on Postgres; with
 * `skipLocked`, rows another statement holds are left out instead of waited for. `only`:
 * rows that fail it are neither locked nor changed (a lock writes the row, as an update does).
 *
 * The locking subquery sits in `ARRAY(…)`, which Postgres runs once, before the update (an
 * init plan). As `jobs.id IN (subquery)` the planner was free to join it, and with some
 * statistics it made it the inner side of a nested-loop semi join: the subquery ran again
 * for every job of the batch, each run re-reading the batch (during bench/backlog.ts a
 * 100-job claim read 24 000 buffers and took 40 ms; 13 ms this way).
 */
function lockedInOrder(
  db: Kysely<Database>,
  ids: readonly string[],
  skipLocked = false,
  only?: RawBuilder<unknown>,
) {
  const among = asArrays(db, ids.length)
    ? sql`= ANY(${[...ids]}::text[])`
    : sql`IN (${sql.join([...ids])})`;
  if (!isPostgresDb(db)) return sql`jobs.id ${among}`;
  const skip = skipLocked ? sql` SKIP LOCKED` : sql``;
  const filter = only ? sql` AND ${only}` : sql``;
  return sql`jobs.id = ANY(ARRAY(SELECT id FROM jobs WHERE id ${among}${filter} ORDER BY id FOR UPDATE${skip}))`;
}

/**
 * Published marks are not urgent (the outbox only looks at jobs older than a grace
 * period, 10 s by default), so the marks of 50 ms of submits share one UPDATE instead of
 * one commit each.
 */
export function publishedMarker(db: Kysely<Database>, maxParameters: number, direct = false) {
  const batcher = naturalBatcher<{ id: string; now: number }, void>(
    async (marks) => {
      const now = Math.max(...marks.map((mark) => mark.now));
      await markPublishedMany(
        db,
        maxParameters,
        marks.map((mark) => mark.id),
        now,
      );
      return marks.map(() => undefined);
    },
    { lingerMs: 50, direct },
  );
  return (id: string, now: number) => batcher.add({ id, now });
}

/**
 * Stamps jobs as published, those still queued: the outbox looks only at queued jobs, so a
 * job claimed before its mark (most of them, at ordinary load: a claim takes milliseconds,
 * the mark waits 50 ms) needs none, and is neither locked nor written for it (issue 29: one row
 * write per job fewer). A job another statement holds is skipped: it is being claimed or
 * settled; at worst a skipped job still queued is published once more, which agents
 * tolerate.
 */
export async function markPublishedMany(
  db: Kysely<Database>,
  maxParameters: number,
  ids: readonly string[],
  now: number,
): Promise<void> {
  // By id only, as the claims (`bare`): a condition on `status` the planner could serve with
  // an index of queued jobs made it scan them all for each mark once the statistics saw few.
  const queued = sql`${bare("status")} = 'queued'`;
  for (const part of chunks(ids, 1, 1, maxParameters)) {
    await sql`UPDATE jobs SET published_at = ${now}
      WHERE ${lockedInOrder(db, part, true, queued)} AND ${queued}`.execute(db);
  }
}

export interface ClaimItem {
  id: string;
  attempt: number;
}

export interface ClaimOptions {
  agentId: string;
  now: number;
  models: readonly string[];
  /** A running job is taken over only if not heard from since then (job-transitions.ts). */
  takeoverBefore?: number;
}

/** The batched `JobStore.claim`: the jobs this agent now holds, in no particular order. */
export async function claimMany(
  db: Kysely<Database>,
  maxParameters: number,
  items: readonly ClaimItem[],
  claim: ClaimOptions,
): Promise<JobRow[]> {
  if (items.length === 0 || claim.models.length === 0) return [];
  const fixed = 7 + claim.models.length;
  const claimed: JobRow[] = [];
  for (const part of chunks(items, 3, fixed, maxParameters)) {
    const batch = rowsTable(db, [
      { name: "b_id", type: "text", values: part.map((item) => item.id) },
      { name: "b_attempt", type: "integer", values: part.map((item) => item.attempt) },
    ]);
    const { rows } = await sql<JobRow>`${plannedFor(db, part.length)}
      UPDATE jobs SET
        status = 'running', attempt = b.b_attempt, agent_id = ${claim.agentId},
        started_at = ${claim.now}, error = NULL, updated_at = ${claim.now},
        last_seq = last_seq + 1, wasted_gpu_ms = ${lostRunChange().wasted_gpu_ms}
      FROM ${batch}
      WHERE jobs.id = b.b_id
        AND ${lockedInOrder(
          db,
          part.map((item) => item.id),
        )}
        AND ${bare("expires_at")} >= ${claim.now}
        AND ${bare("model")} IN (${sql.join([...claim.models])})
        AND ((${bare("status")} = 'queued' AND jobs.released_at IS NOT NULL)
          OR (${bare("status")} = 'running' AND jobs.attempt < b.b_attempt${takeoverCondition(
            "jobs.updated_at",
            claim.takeoverBefore,
          )}))
      RETURNING ${returningJob}`.execute(db);
    claimed.push(...rows);
  }
  return claimed;
}

export interface SuccessItem {
  id: string;
  attempt: number;
  output: unknown;
  /** What the run used (a success is always billed; usage.ts). */
  run?: RunUsage;
}

/** The batched `JobStore.succeed`, for the running attempts `agentId` holds. */
export async function succeedMany(
  db: Kysely<Database>,
  maxParameters: number,
  items: readonly SuccessItem[],
  report: { agentId: string; now: number },
): Promise<JobRow[]> {
  const succeeded: JobRow[] = [];
  for (const part of chunks(items, 8, 4, maxParameters)) {
    const column = (
      name: string,
      type: BatchColumn["type"],
      of: (item: SuccessItem) => string | number | null,
    ): BatchColumn => ({ name, type, values: part.map(of) });
    const batch = rowsTable(db, [
      column("b_id", "text", (item) => item.id),
      column("b_attempt", "integer", (item) => item.attempt),
      column("b_output", "text", (item) => JSON.stringify(item.output ?? null)),
      column("b_gpu_ms", "integer", (item) => Math.max(0, Math.round(item.run?.gpuMs ?? 0))),
      column("b_provider", "text", (item) => item.run?.provider ?? null),
      column("b_device", "text", (item) => item.run?.device ?? null),
      column("b_load_ms", "integer", (item) =>
        item.run?.loadMs ? Math.round(item.run.loadMs) : null,
      ),
    ]);
    // Each success is a billed run: its time and count ride in the change, and the trigger
    // of migration 0022 rolls them up in this same statement.
    const { rows } = await sql<JobRow>`${plannedFor(db, part.length)}
      UPDATE jobs SET
        status = 'succeeded', output = b.b_output, finished_at = ${report.now},
        updated_at = ${report.now}, last_seq = last_seq + 1,
        gpu_ms = jobs.gpu_ms + b.b_gpu_ms, billed_runs = jobs.billed_runs + 1,
        provider = COALESCE(b.b_provider, jobs.provider),
        device = COALESCE(b.b_device, jobs.device), load_ms = b.b_load_ms
      FROM ${batch}
      WHERE jobs.id = b.b_id
        AND ${lockedInOrder(
          db,
          part.map((item) => item.id),
        )}
        AND ${bare("status")} = 'running'
        AND jobs.attempt = b.b_attempt
        AND jobs.agent_id = ${report.agentId}
      RETURNING ${returningJob}`.execute(db);
    succeeded.push(...rows);
  }
  return succeeded;
}
