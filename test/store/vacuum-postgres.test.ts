import { type Kysely, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deadRowVacuum } from "../../gateway/store/statistics.ts";
import type { Database } from "../../shared/db/schema.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * The sweep vacuums the dead row versions jobs leave behind (store/statistics.ts) where
 * autovacuum is off or waits for a fifth of the table: every change of a job leaves one,
 * and a drain of 100 000 jobs slowed from 1 000 to 600 jobs/s as they piled up.
 */
let database: Awaited<ReturnType<typeof openTestDatabase>>;
let db: Kysely<Database>;

beforeAll(async () => {
  database = await openTestDatabase("postgres");
  db = database.db;
  await sql`
    INSERT INTO jobs (id, tenant_id, model, status, priority, input, attempt, created_at,
      updated_at, expires_at, last_seq, released_at)
    SELECT 'job_' || lpad(n::text, 8, '0'), 'ten_vac', 'noop', 'queued', 5, '{}', 0, n, n,
      9999999999999, 1, NULL
    FROM generate_series(1, 5000) AS n`.execute(db);
});
afterAll(() => database?.close());

/** How many times `jobs` was vacuumed: what a dead row's removal depends on besides (no
 * older snapshot open anywhere in the database: tests beside this one may hold one). */
async function vacuums(): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    SELECT vacuum_count::text AS n FROM pg_stat_user_tables
    WHERE schemaname = current_schema() AND relname = 'jobs'`.execute(db);
  return Number(rows[0]?.n ?? 0);
}

/** Dead row versions of `jobs`, as the statistics views say once they have caught up. */
async function deadRows(atLeast: number): Promise<number> {
  for (let waited = 0; ; waited += 200) {
    const { rows } = await sql<{ n: string }>`
      SELECT n_dead_tup::text AS n FROM pg_stat_user_tables
      WHERE schemaname = current_schema() AND relname = 'jobs'`.execute(db);
    const dead = Number(rows[0]?.n ?? 0);
    // Backends publish their counters when idle, within about ten seconds at most.
    if (dead >= atLeast || waited > 20_000) return dead;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("dead rows of jobs on Postgres", () => {
  it("are vacuumed once they pass 1 000 and a tenth of the table, at most every 15 s", async () => {
    let clock = 1_000_000;
    const vacuum = deadRowVacuum(db, () => clock);
    expect(await vacuum()).toEqual([]);
    // Every job changed twice: 10 000 dead versions beside 5 000 live rows.
    await sql`UPDATE jobs SET updated_at = updated_at + 1`.execute(db);
    await sql`UPDATE jobs SET updated_at = updated_at + 1`.execute(db);
    expect(await deadRows(10_000)).toBeGreaterThanOrEqual(10_000);
    expect(await vacuum()).toEqual(["jobs"]);
    expect(await vacuums()).toBe(1);

    await sql`UPDATE jobs SET updated_at = updated_at + 1`.execute(db);
    expect(await deadRows(5_000)).toBeGreaterThanOrEqual(5_000);
    // Dead again at once: not before 15 s have passed since this gateway's vacuum; then again.
    expect(await vacuum()).toEqual([]);
    expect(await vacuums()).toBe(1);
    clock += 14_999;
    expect(await vacuum()).toEqual([]);
    clock += 1;
    expect(await vacuum()).toEqual(["jobs"]);
    expect(await vacuums()).toBe(2);
  });
});
