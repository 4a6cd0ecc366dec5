import { type Kysely, PostgresAdapter, type RawBuilder, sql } from "kysely";
import { limitClause } from "../../shared/db/inline-limits.ts";
import type { Database } from "../../shared/db/schema.ts";
import type {
  JobPurgeStage,
  PurgeCandidate,
  PurgeLease,
  RetentionScope,
} from "./retention-leases.ts";

/**
 * Retention's job statements (bound in retention-store.ts). A pass claims a batch of due rows
 * with a lease in one UPDATE (on Postgres skipping rows another claim holds, so gateways
 * sweeping at once split the work instead of queueing on each other's locks), works on
 * them, then settles only the rows it still holds. Each statement touches one bounded batch,
 * so no lock is held longer than one batch's statement.
 */

export const TERMINAL = sql.raw(`('succeeded', 'failed', 'canceled', 'expired')`);
/**
 * The literal that the partial index jobs_retention_inputs (migration 0013) repeats: an
 * input naming an upload. Written into the statement, not bound, so planners match it.
 */
const NAMES_UPLOAD = sql.raw(`input LIKE '%"upl_%'`);
/** Tenant overrides that set a retention (plans.ts: every such limit ends so). */
export const SETS_RETENTION = sql.raw(`limits LIKE '%retention_seconds%'`);

export const isPostgres = (db: Kysely<Database>) =>
  db.getExecutor().adapter instanceof PostgresAdapter;

/** D1 binds at most 100 parameters; these statements bind the ids plus a few. */
export const ID_CHUNK = 90;

export function chunked<T>(items: readonly T[], size = ID_CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** Which tenants' rows a statement may touch. */
export function scopeCondition(scope: RetentionScope, column: string): RawBuilder<unknown> {
  const ref = sql.ref(column);
  if ("tenantId" in scope) return sql`${ref} = ${scope.tenantId}`;
  // A stored plan the code does not know counts as free (tenants.ts planOf).
  const plans =
    scope.plan === "free" ? sql`plan NOT IN ('pro', 'enterprise')` : sql`plan = ${scope.plan}`;
  return sql`${ref} IN (SELECT id FROM tenants WHERE ${plans}
    AND (limits IS NULL OR NOT ${SETS_RETENTION}))`;
}

function stagePending(stage: JobPurgeStage): RawBuilder<unknown> {
  switch (stage) {
    case "inputs":
      return sql`finished_at IS NOT NULL AND inputs_purged_at IS NULL AND ${NAMES_UPLOAD}`;
    case "outputs":
      return sql`finished_at IS NOT NULL AND data_expired_at IS NULL`;
    case "rows":
      // Only once the blobs are gone: deleting the row first would orphan them.
      return sql`data_expired_at IS NOT NULL
        AND (inputs_purged_at IS NOT NULL OR NOT ${NAMES_UPLOAD})`;
  }
}

/**
 * Neither leased nor backing off: `purge_until` is a live lease's end, or after a failure
 * (releaseJobs) when the row may be tried again. A claim passes over the others.
 */
export const free = (now: number) => sql`(purge_until IS NULL OR purge_until < ${now})`;

/** Free, or already this pass's: a row an earlier stage of the pass failed on stays held. */
const claimable = (lease: PurgeLease) => sql`(purge_token = ${lease.token} OR ${free(lease.now)})`;

export async function claimJobs(
  db: Kysely<Database>,
  stage: JobPurgeStage,
  scope: RetentionScope,
  endedBefore: number,
  lease: PurgeLease,
  limit: number,
): Promise<PurgeCandidate[]> {
  const lock = isPostgres(db) ? sql` FOR UPDATE SKIP LOCKED` : sql``;
  const result = await sql<PurgeCandidate>`
    UPDATE jobs SET purge_token = ${lease.token}, purge_until = ${lease.until}
    WHERE id IN (
      SELECT id FROM jobs
      WHERE ${stagePending(stage)} AND status IN ${TERMINAL}
        AND finished_at < ${endedBefore} AND ${scopeCondition(scope, "tenant_id")}
        AND ${claimable(lease)}
      ORDER BY finished_at ${limitClause(limit)}${lock})
    AND ${claimable(lease)}
    RETURNING id, tenant_id, input, output, purge_failures`.execute(db);
  return result.rows;
}

/**
 * Records a stage done for the rows this lease still holds, and lets them go (`keepLease`:
 * keeps them, as for rows an earlier stage of the same pass failed on); returns how many.
 */
export async function finishJobs(
  db: Kysely<Database>,
  stage: "inputs" | "outputs",
  ids: readonly string[],
  token: string,
  now: number,
  keepLease = false,
): Promise<number> {
  let done = 0;
  for (const part of chunked(ids)) {
    let query = db.updateTable("jobs").where("id", "in", part).where("purge_token", "=", token);
    if (!keepLease) query = query.set({ purge_token: null, purge_until: null, purge_failures: 0 });
    query =
      stage === "inputs"
        ? query.set({ inputs_purged_at: now })
        : query.set({ output: null, data_expired_at: now });
    const result = await query.executeTakeFirst();
    done += Number(result.numUpdatedRows);
  }
  return done;
}

/**
 * Gives rows back after a failure: no claim takes them before `retryAt` (the rows behind
 * them are claimed meanwhile), and their count of failures goes up by one.
 */
export async function releaseJobs(
  db: Kysely<Database>,
  ids: readonly string[],
  token: string,
  retryAt: number,
): Promise<void> {
  for (const part of chunked(ids)) {
    await db
      .updateTable("jobs")
      .set((eb) => ({
        purge_token: null,
        purge_until: retryAt,
        purge_failures: eb("purge_failures", "+", 1),
      }))
      .where("id", "in", part)
      .where("purge_token", "=", token)
      .execute();
  }
}

/**
 * Deletes held jobs with everything recorded about them. The dependants go first and the
 * job row last, each statement alone (D1 has no transactions): a gateway that stops half
 * way leaves the job row, and with it a later sweep that finishes the work.
 */
export async function deleteJobs(
  db: Kysely<Database>,
  ids: readonly string[],
  token: string,
): Promise<number> {
  let deleted = 0;
  for (const part of chunked(ids)) {
    const held = (
      await db
        .selectFrom("jobs")
        .select("id")
        .where("id", "in", part)
        .where("purge_token", "=", token)
        .execute()
    ).map((row) => row.id);
    if (held.length === 0) continue;
    await db
      .deleteFrom("webhook_attempts")
      .where("delivery_id", "in", (q) =>
        q.selectFrom("webhook_deliveries").select("id").where("job_id", "in", held),
      )
      .execute();
    await db.deleteFrom("webhook_deliveries").where("job_id", "in", held).execute();
    await db.deleteFrom("webhook_outbox").where("job_id", "in", held).execute();
    await db.deleteFrom("job_events").where("job_id", "in", held).execute();
    const result = await db
      .deleteFrom("jobs")
      .where("id", "in", held)
      .where("purge_token", "=", token)
      .executeTakeFirst();
    deleted += Number(result.numDeletedRows);
  }
  return deleted;
}

/**
 * A tenant's rows that a claim passes over now: held back after a failure until their retry,
 * or leased by another pass. A tenant purge is not done while any are left.
 */
export async function heldBack(
  db: Kysely<Database>,
  tenantId: string,
  now: number,
): Promise<number> {
  let held = 0;
  for (const table of ["jobs", "uploads"] as const) {
    const row = await db
      .selectFrom(table)
      .select((eb) => eb.fn.countAll<number | string | bigint>().as("n"))
      .where("tenant_id", "=", tenantId)
      .where("purge_until", ">=", now)
      .executeTakeFirstOrThrow();
    held += Number(row.n);
  }
  return held;
}

/** A tenant's jobs still queued or running: what a tenant purge leaves alone. */
export async function activeJobs(db: Kysely<Database>, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom("jobs")
    .select((eb) => eb.fn.countAll<number | string | bigint>().as("n"))
    .where("tenant_id", "=", tenantId)
    .where("status", "in", ["queued", "running"])
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
