import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import { instant, type Migration } from "./types.ts";

/**
 * Usage (issue 28): the device time each run used, kept on its job and rolled up per
 * tenant, API key, model and hour in `usage_hourly`, which outlives the jobs (retention
 * prunes it on its own, much later).
 *
 * - `jobs.key_id`: the API key that submitted the job (null on older jobs).
 * - `jobs.gpu_ms`, `jobs.billed_runs`: the device time of the runs that ended the job
 *   (succeeded, or failed by its own input), and how many such runs there were (a job put
 *   back with `POST /v1/jobs/{id}/retry` may end twice). `jobs.wasted_gpu_ms`: the runs the
 *   fleet lost (a crash, an eviction, a transient failure); never billed.
 * - `jobs.provider`, `jobs.device`: where its latest run ran.
 *
 * The rollup is written by the database, in the statement that records the run, so it can
 * never miss a run or count one twice, whatever dies when (as the job events of 0005). On
 * SQLite and D1 a row trigger upserts the hour's row. On Postgres a statement trigger does,
 * over the statement's transition tables, summed per row of `usage_hourly` and upserted in
 * key order: a batched report settles jobs of many tenants in one statement, and two such
 * statements locking the same hour rows in different orders would deadlock.
 */
export const usage: Migration = {
  name: "0022_usage",
  async up(db, dialect) {
    const big = sql.raw(dialect === "postgres" ? "bigint" : "integer");
    await addColumn(db, dialect, "jobs", "key_id", sql`text`);
    await addColumn(db, dialect, "jobs", "gpu_ms", sql`${big} not null default 0`);
    await addColumn(db, dialect, "jobs", "wasted_gpu_ms", sql`${big} not null default 0`);
    await addColumn(db, dialect, "jobs", "billed_runs", sql`integer not null default 0`);
    await addColumn(db, dialect, "jobs", "provider", sql`text`);
    await addColumn(db, dialect, "jobs", "device", sql`text`);
    await db.schema
      .createTable("usage_hourly")
      .ifNotExists()
      .addColumn("tenant_id", "text", (c) => c.notNull())
      .addColumn("hour", instant(dialect), (c) => c.notNull())
      .addColumn("model", "text", (c) => c.notNull())
      // '' for jobs without a key: a NULL would make every such row distinct in the key.
      .addColumn("key_id", "text", (c) => c.notNull())
      .addColumn("jobs", instant(dialect), (c) => c.notNull().defaultTo(0))
      .addColumn("gpu_ms", instant(dialect), (c) => c.notNull().defaultTo(0))
      .addColumn("wasted_gpu_ms", instant(dialect), (c) => c.notNull().defaultTo(0))
      .addPrimaryKeyConstraint("usage_hourly_pk", ["tenant_id", "hour", "model", "key_id"])
      .execute();
    // Every tenant's hours (the admin report, the pruning): the key leads with the tenant.
    await sql`CREATE INDEX IF NOT EXISTS usage_hourly_hour ON usage_hourly (hour)`.execute(db);
    if (dialect === "postgres") await postgresTrigger(db);
    else await sqliteTrigger(db);
  },
};

const HOUR_MS = 3_600_000;

async function postgresTrigger(db: Parameters<Migration["up"]>[0]): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION gantry_job_usage() RETURNS trigger AS $$
    BEGIN
      INSERT INTO usage_hourly AS u (tenant_id, hour, model, key_id, jobs, gpu_ms, wasted_gpu_ms)
      SELECT n.tenant_id, n.updated_at - n.updated_at % ${sql.lit(HOUR_MS)}, n.model,
             COALESCE(n.key_id, ''),
             SUM(n.billed_runs - o.billed_runs)::bigint,
             SUM(n.gpu_ms - o.gpu_ms)::bigint,
             SUM(n.wasted_gpu_ms - o.wasted_gpu_ms)::bigint
      FROM gantry_usage_new n JOIN gantry_usage_old o ON o.id = n.id
      WHERE n.billed_runs <> o.billed_runs OR n.gpu_ms <> o.gpu_ms
         OR n.wasted_gpu_ms <> o.wasted_gpu_ms
      GROUP BY 1, 2, 3, 4
      ORDER BY 1, 2, 3, 4
      ON CONFLICT (tenant_id, hour, model, key_id) DO UPDATE SET
        jobs = u.jobs + EXCLUDED.jobs,
        gpu_ms = u.gpu_ms + EXCLUDED.gpu_ms,
        wasted_gpu_ms = u.wasted_gpu_ms + EXCLUDED.wasted_gpu_ms;
      RETURN NULL;
    END
    $$ LANGUAGE plpgsql`.execute(db);
  // Transition tables admit no column list, so it runs after every UPDATE of jobs; the
  // join finds nothing to add for all but the reports that carry usage.
  await sql`
    CREATE OR REPLACE TRIGGER jobs_usage
    AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS gantry_usage_old NEW TABLE AS gantry_usage_new
    FOR EACH STATEMENT EXECUTE FUNCTION gantry_job_usage()`.execute(db);
}

async function sqliteTrigger(db: Parameters<Migration["up"]>[0]): Promise<void> {
  await sql`
    CREATE TRIGGER IF NOT EXISTS jobs_usage
    AFTER UPDATE OF gpu_ms, wasted_gpu_ms, billed_runs ON jobs
    WHEN NEW.billed_runs <> OLD.billed_runs OR NEW.gpu_ms <> OLD.gpu_ms
      OR NEW.wasted_gpu_ms <> OLD.wasted_gpu_ms
    BEGIN
      INSERT INTO usage_hourly (tenant_id, hour, model, key_id, jobs, gpu_ms, wasted_gpu_ms)
      VALUES (
        NEW.tenant_id, NEW.updated_at - NEW.updated_at % ${sql.lit(HOUR_MS)}, NEW.model,
        COALESCE(NEW.key_id, ''), NEW.billed_runs - OLD.billed_runs,
        NEW.gpu_ms - OLD.gpu_ms, NEW.wasted_gpu_ms - OLD.wasted_gpu_ms
      )
      ON CONFLICT (tenant_id, hour, model, key_id) DO UPDATE SET
        jobs = jobs + excluded.jobs,
        gpu_ms = gpu_ms + excluded.gpu_ms,
        wasted_gpu_ms = wasted_gpu_ms + excluded.wasted_gpu_ms;
    END`.execute(db);
}
