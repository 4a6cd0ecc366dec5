import { type RawBuilder, sql } from "kysely";
import type { Migration } from "./types.ts";

/**
 * `gantry_insert_jobs` (Postgres; issue 29): a group of submitted jobs inserted with their
 * release decided under the release passes' lock, in one statement and one round trip
 * (gateway/store/insert-released.ts says when a job goes out released, and why).
 *
 * It is a function because the lock must be taken before the counts are read: a statement
 * reads one snapshot, taken when it starts, so a lock taken inside it would not show what
 * the previous holder committed. Each statement of a VOLATILE function takes a fresh one.
 * Done as BEGIN, the lock, the read, the INSERT and COMMIT from the gateway, it was four round
 * trips where a plain insert is one: each a write to the socket and a wake-up of a backend,
 * about half of a paced job's statements.
 *
 * `candidates`: `[{ "row": {column: value}, "window": n | null, "max_active": n | null }]`,
 * every row with the same columns. A model's rows go in released (`released_at` = `now_ms`)
 * when every one of them tries (a window and a limit), none of the model's jobs is held, its
 * released jobs plus these fit the window (never smaller than what runs), and each tenant's
 * running and released jobs plus its rows in the group stay within that row's limit.
 *
 * The predicates are the ones of gateway/store/release-line.ts (`ACTIVE`, `HELD`), written
 * out: a migration is frozen.
 */
/**
 * The columns the function writes, the ones a submit sets (gateway/store/job-inserts.ts,
 * whose rows the compiler holds to exactly these), as a list and not the rows' keys: a
 * statement built per call (EXECUTE) cost Postgres about 150 µs more per insert than this
 * one, planned once per connection. A later migration that adds a column replaces the
 * function with a longer list.
 */
export const INSERTED_COLUMNS = [
  "id",
  "tenant_id",
  "model",
  "status",
  "priority",
  "input",
  "output",
  "error",
  "webhook",
  "attempt",
  "agent_id",
  "idempotency_key",
  "request_hash",
  "traceparent",
  "created_at",
  "updated_at",
  "started_at",
  "finished_at",
  "expires_at",
  "published_at",
  "last_seq",
  "metadata",
  "batch_id",
  "timeout_seconds",
  "timeout_default",
  "key_id",
  "fairness_key",
  "released_at",
] as const;
export type InsertedColumn = (typeof INSERTED_COLUMNS)[number];

export const insertReleased: Migration = {
  name: "0026_insert_released",
  async up(db, dialect) {
    if (dialect !== "postgres") return;
    await insertJobsFunction(sql`(tenant_id, idempotency_key)`).execute(db);
  },
};

/**
 * The function's statements are planned once per connection (migration 0028 says why), and a
 * function defined again keeps that.
 */
export const GENERIC_PLANS = sql`SET plan_cache_mode = force_generic_plan`;

/**
 * The statement that (re)defines `gantry_insert_jobs`, with `conflict` as the target its
 * INSERT skips a row on (an Idempotency-Key already used): the one place its body is
 * written, so a migration that only moves that target (0027) does not copy the rest.
 */
export function insertJobsFunction(conflict: RawBuilder<unknown>) {
  const columns = sql.raw(INSERTED_COLUMNS.join(", "));
  return sql`
      CREATE OR REPLACE FUNCTION gantry_insert_jobs(lock_key bigint, candidates jsonb, now_ms bigint)
      RETURNS SETOF jobs AS $$
      DECLARE
        decided jsonb;
      BEGIN
        PERFORM pg_advisory_xact_lock(lock_key);
        WITH c AS (
          SELECT e->'row' AS row, e->'row'->>'model' AS model,
                 e->'row'->>'tenant_id' AS tenant_id,
                 (e->>'window')::bigint AS win, (e->>'max_active')::bigint AS max_active, ord
          FROM jsonb_array_elements(candidates) WITH ORDINALITY AS x(e, ord)
        ), tenants AS (
          SELECT t.tenant_id, t.adding,
                 (SELECT count(*) FROM jobs j WHERE j.tenant_id = t.tenant_id
                    AND (j.status = 'running' OR (j.status = 'queued' AND j.released_at IS NOT NULL)))
                   AS active
          FROM (SELECT tenant_id, count(*) AS adding FROM c GROUP BY tenant_id) t
        ), models AS (
          SELECT model, count(*) AS adding, min(win) AS win,
                 bool_and(win IS NOT NULL AND max_active IS NOT NULL) AS trying
          FROM c GROUP BY model
        ), free AS (
          SELECT m.model FROM models m,
            LATERAL (
              SELECT count(*) FILTER (WHERE j.status = 'queued') AS released,
                     count(*) FILTER (WHERE j.status = 'running') AS running
              FROM jobs j WHERE j.model = m.model
                AND (j.status = 'running' OR (j.status = 'queued' AND j.released_at IS NOT NULL))
            ) w
          WHERE m.trying
            AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.model = m.model
                              AND j.status = 'queued' AND j.released_at IS NULL)
            AND w.released + m.adding <= GREATEST(m.win, w.running)
            AND NOT EXISTS (SELECT 1 FROM c JOIN tenants t USING (tenant_id)
                              WHERE c.model = m.model AND t.active + t.adding > c.max_active)
        )
        SELECT jsonb_agg(CASE WHEN c.model IN (SELECT model FROM free)
                              THEN c.row || jsonb_build_object('released_at', now_ms)
                              ELSE c.row END ORDER BY c.ord)
          INTO decided FROM c;
        RETURN QUERY
          INSERT INTO jobs (${columns}) SELECT ${columns}
            FROM jsonb_populate_recordset(NULL::jobs, decided)
          ON CONFLICT ${conflict} DO NOTHING RETURNING *;
      END
      $$ LANGUAGE plpgsql ${GENERIC_PLANS}`;
}
