import { type Insertable, type Kysely, sql } from "kysely";
import {
  INSERTED_COLUMNS,
  type InsertedColumn,
} from "../../shared/db/migrations/0026-insert-released.ts";
import type { Database, JobTable } from "../../shared/db/schema.ts";
import { type NaturalBatcherOptions, naturalBatcher } from "../../shared/natural-batch.ts";
import { type Candidate, type ReleaseIfFree, releaseAtInsert } from "./insert-released.ts";
import { isPostgresDb } from "./job-metadata.ts";
import { JOB_COLUMNS, type JobRow } from "./job-rows.ts";

export interface NewJob {
  id: string;
  tenantId: string;
  model: string;
  priority: number;
  input: unknown;
  webhook: unknown | null;
  idempotencyKey: string | null;
  requestHash: string | null;
  traceparent: string | null;
  now: number;
  expiresAt: number;
  metadata?: Record<string, string> | null;
  /** The batch it is one item of (`POST /v1/batches`). */
  batchId?: string | null;
  /** Its execution limit; `timeoutDefault` when that is its task's default. */
  timeoutSeconds?: number | null;
  timeoutDefault?: boolean;
  /** The API key that submitted it: usage is rolled up per key (migration 0022). */
  keyId?: string | null;
  /** Shares the tenant's portion among its own users (gateway/jobs/fair-order.ts). */
  fairnessKey?: string | null;
  /**
   * True: the job waits in the store until the fair release picks it (job-release.ts);
   * false (the default): it is released at once, for a caller that publishes it itself.
   */
  held?: boolean;
  /**
   * With `held`: released at once all the same when a release pass would release it now
   * (nothing of its model held, room in the window and under the tenant's limit), decided
   * under the passes' lock in the insert's own transaction (insert-released.ts). Not on D1:
   * there the pass after the submit releases it.
   */
  releaseIfFree?: ReleaseIfFree;
}

/**
 * The row's columns, each a bound parameter of the INSERT: exactly those the release at
 * insert's function writes on Postgres (migration 0026), which the compiler checks, so that
 * a column added here without a new version of the function cannot be dropped there.
 */
function toRow(job: NewJob): Insertable<JobTable> {
  return {
    id: job.id,
    tenant_id: job.tenantId,
    model: job.model,
    status: "queued",
    priority: job.priority,
    input: JSON.stringify(job.input),
    output: null,
    error: null,
    webhook: job.webhook === null ? null : JSON.stringify(job.webhook),
    attempt: 0,
    agent_id: null,
    idempotency_key: job.idempotencyKey,
    request_hash: job.requestHash,
    traceparent: job.traceparent,
    created_at: job.now,
    updated_at: job.now,
    started_at: null,
    finished_at: null,
    expires_at: job.expiresAt,
    published_at: null,
    last_seq: 1,
    metadata: job.metadata ? JSON.stringify(job.metadata) : null,
    batch_id: job.batchId ?? null,
    timeout_seconds: job.timeoutSeconds ?? null,
    timeout_default: job.timeoutSeconds == null ? null : job.timeoutDefault ? 1 : 0,
    key_id: job.keyId ?? null,
    fairness_key: job.fairnessKey ?? null,
    released_at: job.held ? null : job.now,
  } satisfies Record<InsertedColumn, unknown>;
}

type Inserted = { row: JobRow | null } | { error: unknown };

/**
 * SQLite's and D1's INSERT of many rows in one statement whatever their number: the rows as
 * one bound JSON array (each row its columns' values in `INSERTED_COLUMNS` order) read back
 * by `json_each`, since D1 takes at most 100 bound parameters a statement, which is three
 * rows of the VALUES form. The `WHERE true` keeps SQLite from reading `ON CONFLICT` as the
 * SELECT's join constraint (sqlite.org/lang_upsert.html, "parsing ambiguity").
 */
async function insertJsonRows(db: Kysely<Database>, rows: Insertable<JobTable>[]) {
  const values = JSON.stringify(rows.map(jsonRow));
  const columns = INSERTED_COLUMNS.map((_, i) => sql.raw(`json_extract(value, '$[${i}]')`));
  const { rows: inserted } = await sql<JobRow>`
    INSERT INTO jobs (${sql.raw(INSERTED_COLUMNS.join(", "))})
    SELECT ${sql.join(columns)} FROM json_each(${values}) WHERE true
    ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *`.execute(db);
  return inserted;
}

const jsonRow = (row: Insertable<JobTable>) =>
  INSERTED_COLUMNS.map((column) => row[column] ?? null);

/**
 * Bytes of rows one `insertJsonRows` statement carries at most: D1 takes a string of up to
 * 2 MB (https://developers.cloudflare.com/d1/platform/limits/, "Maximum string, BLOB or
 * table row size"), and a row's JSON text is about its size in the array.
 */
const JSON_ROWS_BYTES = 1_000_000;

/**
 * The INSERT of `toRow`'s rows, every column bound. SQL text rather than Kysely's builder:
 * each submit at ordinary load inserts alone, and building 28 columns a row node by node
 * was the largest part of the builder's work left in the embedded gateway at 200 jobs/s
 * (issue 29). The unique index holds keyed jobs only (migration 0027): the conflict
 * target names its predicate.
 */
async function insertJobRows(db: Kysely<Database>, rows: Insertable<JobTable>[]) {
  const values = rows.map(
    (row) => sql`(${sql.join(INSERTED_COLUMNS.map((column) => row[column] ?? null))})`,
  );
  const { rows: inserted } = await sql<JobRow>`
    INSERT INTO jobs (${sql.raw(INSERTED_COLUMNS.join(", "))}) VALUES ${sql.join(values)}
    ON CONFLICT (tenant_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *`.execute(db);
  return inserted;
}

/**
 * Job inserts with group commit: submits that arrive while an insert is running go in the
 * next one as a single multi-row INSERT, one statement and one commit for all of them. A
 * row whose tenant already used its Idempotency-Key comes back as null, as alone. If a
 * batch fails, its jobs are inserted one by one, so one bad row fails only its own submit.
 *
 * `maxParameters` is the database's bound on parameters per statement (D1: 100, which
 * makes batches of four).
 */
export function jobInserter(db: Kysely<Database>, maxParameters: number, direct = false) {
  // A job a pass would release at once goes in released (insert-released.ts). Not on D1
  // (`direct`: Workers), which has no interactive transactions.
  const releasing = direct ? async () => null : releaseAtInsert(db, insertJobRows);
  return gatheredInserts(db, insertJobRows, releasing, {
    maxBatch: Math.max(1, Math.floor(maxParameters / JOB_COLUMNS.length)),
    direct,
    // SQLite's statements finish in process before anything else runs, so submits only
    // group when they wait for the loop's turn; its commit (WAL frames for every page the
    // insert touched) is most of an insert's cost.
    nextTurn: !isPostgresDb(db),
  });
}

/**
 * The inserts of one request's many submits (a batch's items) on D1, where the store's own
 * inserter is `direct` (Workers: no statement may carry two requests' jobs): gathered among
 * themselves only, each flush one `insertJsonRows` statement of up to `JSON_ROWS_BYTES`, so
 * a 1 000-item batch costs a few statements against the 1 000 D1 queries a Worker
 * invocation may make (https://developers.cloudflare.com/d1/platform/limits/), not one per
 * item. Made anew for each request; SQLite and D1 only (`json_each`).
 */
export function requestJobInserter(db: Kysely<Database>) {
  return gatheredInserts(db, insertJsonRows, async () => null, {
    maxBatch: 1_000,
    weigh: (job) => JSON.stringify(jsonRow(toRow(job))).length,
    maxWeight: JSON_ROWS_BYTES,
  });
}

type InsertRows = (db: Kysely<Database>, rows: Insertable<JobTable>[]) => Promise<JobRow[]>;

function gatheredInserts(
  db: Kysely<Database>,
  insertRows: InsertRows,
  releasing: (candidates: Candidate[], now: number) => Promise<JobRow[] | null>,
  options: NaturalBatcherOptions<NewJob>,
) {
  /** One row per statement: one bad row fails only its own submit. */
  const oneByOne = (rows: Insertable<JobTable>[]) =>
    Promise.all(
      rows.map((row) =>
        insertRows(db, [row]).then(
          ([only]): Inserted => ({ row: only ?? null }),
          (cause: unknown): Inserted => ({ error: cause }),
        ),
      ),
    );
  const batcher = naturalBatcher<NewJob, Inserted>(async (jobs) => {
    const candidates: Candidate[] = jobs.map((job) => ({
      row: toRow(job),
      releaseIfFree: job.held ? (job.releaseIfFree ?? null) : null,
    }));
    const rows = candidates.map((candidate) => candidate.row);
    let released: JobRow[] | null;
    try {
      released = await releasing(candidates, Math.max(...jobs.map((job) => job.now)));
    } catch {
      // The try failed (its read, its insert or its commit): held, one by one, and the
      // pass after each submit releases what went in.
      return oneByOne(rows);
    }
    try {
      const written = released ?? (await insertRows(db, rows));
      const inserted = new Map(written.map((row) => [row.id, row]));
      return rows.map((row) => ({ row: inserted.get(row.id as string) ?? null }));
    } catch (error) {
      if (rows.length === 1) return [{ error }];
      return oneByOne(rows);
    }
  }, options);

  /** Inserts a job; null when the tenant already used this Idempotency-Key. */
  return async (job: NewJob): Promise<JobRow | null> => {
    const inserted = await batcher.add(job);
    if ("error" in inserted) throw inserted.error;
    return inserted.row;
  };
}
