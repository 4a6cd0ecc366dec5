/**
 * The gateway's Postgres pool names the statements it repeats, so each connection parses and
 * plans them once (shared/db/pg-prepared.ts); a statement marked `PLAN_EACH_CALL` is sent
 * unnamed instead, to be planned for each call's own values. And the line read that every
 * claim and end of a job starts settles on a generic plan: with its cap a parameter, Postgres
 * kept planning it anew (pg_stat_statements during bench/backlog.ts: 3 752 plans for 4 725
 * calls, 3.1 s of planning; 269 plans and 0.2 s with the cap written in). Read from the
 * connection's own list of prepared statements and the plans each was given.
 */
import { Kysely, PostgresDialect, sql } from "kysely";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { lineOf } from "../../gateway/store/release-line.ts";
import { openDatabase } from "../../shared/db/open.ts";
import { PLAN_EACH_CALL, withPreparedStatements } from "../../shared/db/pg-prepared.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import { freshPostgresUrl, TEST_POSTGRES_URL } from "../helpers/test-gateway.ts";

// One connection: the statements and the list read below are the same session's.
const pool = new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 1 });
const db = new Kysely<Record<string, never>>({
  dialect: new PostgresDialect({ pool: withPreparedStatements(pool) }),
});
afterAll(() => db.destroy());

const prepared = async () => {
  const { rows } = await sql<{ statement: string }>`
    SELECT statement FROM pg_prepared_statements WHERE NOT from_sql`.execute(db);
  return rows.map((row) => row.statement);
};

describe("prepared statements on Postgres", () => {
  it("names a repeated statement once, and leaves one planned for each call unnamed", async () => {
    const tag = `t${Date.now()}`;
    for (const n of [1, 2, 3]) {
      await sql`SELECT ${n}::int AS n, ${sql.lit(tag)} AS named`.execute(db);
      await sql`${sql.raw(PLAN_EACH_CALL)} SELECT ${n}::int AS n, ${sql.lit(tag)} AS each_call`.execute(
        db,
      );
    }
    const statements = (await prepared()).filter((text) => text.includes(tag));
    expect(statements).toHaveLength(1);
    expect(statements[0]).toContain("AS named");
  });
});

describe("a model's line read on Postgres", () => {
  it("settles on one plan, made once per connection", async () => {
    const fresh = freshPostgresUrl("gantry_lineprep");
    const opened = await openDatabase(fresh.url, { maxConnections: 1 });
    const store = opened.db;
    try {
      await sql`
        INSERT INTO jobs (id, tenant_id, model, status, priority, input, attempt, created_at,
          updated_at, expires_at, last_seq, released_at)
        SELECT 'job_' || lpad(n::text, 8, '0'), 'ten_line', 'noop', 'queued', 0, '{}', 0, n, n,
          9999999999999, 1, CASE WHEN n <= 50 THEN n END
        FROM generate_series(1, 20000) AS n`.execute(store);
      // A deep backlog, as the statistics see it: the cap is what keeps a read of it short.
      await sql`ANALYZE jobs`.execute(store);
      // A release pass reads the line first with a cap of 1, then under its lock with twice
      // its window: as Postgres would see them, in turn.
      for (let i = 0; i < 12; i++) await lineOf(store, "noop", i % 2 ? 400 : 1);
      const { rows } = await sql<{ custom_plans: number; generic_plans: number }>`
        SELECT custom_plans::int, generic_plans::int FROM pg_prepared_statements
        WHERE statement LIKE '%''window'' AS kind%'`.execute(store);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        // Postgres tries five custom plans before it weighs the generic one.
        expect(row.custom_plans).toBeLessThanOrEqual(5);
        expect(row.generic_plans).toBeGreaterThan(0);
      }
    } finally {
      await opened.close();
      await dropPostgresSchema(fresh.url, fresh.schema);
    }
  });
});
