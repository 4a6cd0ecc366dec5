/**
 * A release pass reads and marks its few jobs by index once the gateway has refreshed the
 * statistics a backlog outran (store/statistics.ts, from the sweep). Stale statistics are the
 * common case for a backlog (claim-plan-postgres.test.ts): the last ANALYZE saw finished
 * jobs, then 20 000 jobs wait in the store. With them, a pass that released 8 jobs read
 * 40 000 rows for the line alone (both edges of the lane through `jobs_queued_expires` and a
 * sort of every queued job) and the whole backlog again to mark its jobs: 35 ms a pass on
 * bench/backlog.ts, most of the drain's database time. Checked on the executed plans.
 */
import { type Kysely, sql } from "kysely";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { releaseJobs } from "../../gateway/store/job-release.ts";
import { statisticsRefresher } from "../../gateway/store/statistics.ts";
import type { Database } from "../../shared/db/schema.ts";
import {
  jobScans,
  planOf,
  recordingDatabase,
  rowsTouched,
  type SentStatement,
} from "../helpers/plan-rows.ts";

let rig: Awaited<ReturnType<typeof recordingDatabase>>;
let pool: pg.Pool;
let db: Kysely<Database>;
let sent: SentStatement[];

const HELD_JOBS = 20_000;
/** Rows a pass of 8 may read: its jobs, the window's few, the lane's edges. Far below a scan. */
const MOST_TOUCHED = 500;

beforeAll(async () => {
  rig = await recordingDatabase("gantry_relplan");
  ({ pool, db, sent } = rig);
  const insert = (count: number, offset: number, status: string, released: boolean) =>
    sql`
    INSERT INTO jobs (id, tenant_id, model, status, priority, input, attempt, created_at,
      updated_at, expires_at, last_seq, released_at)
    SELECT 'job_' || lpad(n::text, 8, '0'), 'ten_plan', 'noop', ${status}, 5, '{}', 0, n, n,
      9999999999999, 1, ${released ? sql`n` : sql`NULL`}
    FROM generate_series(${offset}::bigint, ${offset + count - 1}::bigint) AS n`.execute(db);
  // The statistics see only finished jobs; then a backlog arrives that ANALYZE never saw.
  await insert(2_000, 0, "succeeded", true);
  await sql`ANALYZE jobs`.execute(db);
  await insert(HELD_JOBS, 2_000, "queued", false);
  await insert(4, 2_000 + HELD_JOBS, "running", true);
});

afterAll(() => rig?.close());

/** Rows changed in `jobs` since its last analyze, as the statistics views say now. */
async function changedSinceAnalyze(): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    SELECT n_mod_since_analyze::text AS n FROM pg_stat_user_tables
    WHERE schemaname = current_schema() AND relname = 'jobs'`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

describe("a release pass on Postgres after a backlog outran the statistics", () => {
  it("has the gateway analyze the tables the backlog changed, once", async () => {
    // Backends publish their counters when idle, within about ten seconds at most.
    for (let waited = 0; (await changedSinceAnalyze()) < HELD_JOBS; waited += 200) {
      if (waited > 20_000) throw new Error("the statistics views never saw the backlog");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    let clock = 1_000_000;
    const refresh = statisticsRefresher(db, () => clock);
    expect(await refresh()).toEqual(["jobs"]);
    expect(await changedSinceAnalyze()).toBeLessThan(1_000);
    // Nothing changed since: the next sweep leaves the tables alone.
    expect(await refresh()).toEqual([]);
    // Changed again at once: not before a minute has passed since this gateway's analyze.
    await sql`UPDATE jobs SET updated_at = updated_at + 1`.execute(db);
    for (let waited = 0; (await changedSinceAnalyze()) < HELD_JOBS; waited += 200) {
      if (waited > 20_000) throw new Error("the statistics views never saw the update");
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(await refresh()).toEqual([]);
    clock += 60_000;
    expect(await refresh()).toEqual(["jobs"]);
  });

  it("then reads the line and marks its 8 jobs without reading the backlog", async () => {
    sent.length = 0;
    const pass = await releaseJobs(
      db,
      "noop",
      8,
      (snapshot) =>
        snapshot.lanes.map((lane) => ({
          priority: lane.priority,
          tenantId: lane.tenantId,
          fairnessKey: lane.fairnessKey,
          count: 8,
          maxActive: 1_000_000,
        })),
      1,
    );
    expect(pass.released.map((job) => job.id)).toEqual(
      Array.from({ length: 8 }, (_, i) => `job_${String(2_000 + i).padStart(8, "0")}`),
    );
    const reads = sent.filter((query) => /\bjobs\b/.test(query.sql) && !/advisory/.test(query.sql));
    expect(reads.some((query) => /UPDATE jobs SET released_at/.test(query.sql))).toBe(true);
    for (const statement of reads) {
      const plan = await planOf(pool, statement);
      expect(jobScans(plan)).toBeGreaterThan(0);
      expect({ sql: statement.sql, touched: rowsTouched(plan) }).toEqual({
        sql: statement.sql,
        touched: expect.toSatisfy((n: number) => n <= MOST_TOUCHED),
      });
    }
  });
});
