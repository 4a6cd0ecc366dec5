/**
 * What a statement read, from its executed plan (EXPLAIN ANALYZE), for the tests that hold
 * the store's hot statements to plans that do not depend on Postgres's statistics.
 */
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema } from "../../shared/db/postgres.ts";
import type { Database } from "../../shared/db/schema.ts";
import { freshPostgresUrl, TEST_POSTGRES_URL } from "./test-gateway.ts";

export type SentStatement = { sql: string; parameters: readonly unknown[] };

/**
 * A fresh schema, migrated, with a Kysely of its own that records every statement it sends
 * (`sent`): what a plan test runs again under EXPLAIN ANALYZE. `close` drops the schema.
 */
export async function recordingDatabase(prefix: string) {
  const fresh = freshPostgresUrl(prefix);
  await (await openDatabase(fresh.url)).close();
  const pool = new pg.Pool({
    connectionString: TEST_POSTGRES_URL,
    options: `-c search_path=${fresh.schema}`,
  });
  const sent: SentStatement[] = [];
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: (event) => {
      if (event.level === "query") sent.push(event.query);
    },
  });
  return {
    pool,
    db,
    sent,
    async close() {
      await db.destroy();
      await dropPostgresSchema(fresh.url, fresh.schema);
    },
  };
}

/**
 * Rows a statement touched, from its executed plan: every row a scan of `jobs` returned or
 * filtered out, each loop counted, and every pair a join compared and threw away. A claim by
 * id touches its batch and at most one pass over the table; the stale-statistics plan
 * touched the queued jobs once per id in the batch.
 */
export function rowsTouched(plan: unknown): number {
  if (!plan || typeof plan !== "object") return 0;
  const node = plan as Record<string, unknown>;
  const count = (key: string) => Number(node[key] ?? 0);
  let touched = count("Rows Removed by Join Filter");
  if (node["Relation Name"] === "jobs") {
    touched += count("Actual Loops") * (count("Actual Rows") + count("Rows Removed by Filter"));
  }
  for (const value of Object.values(node)) {
    for (const child of Array.isArray(value) ? value : [value]) touched += rowsTouched(child);
  }
  return touched;
}

/** How many times each row-locking node of the plan ran (`FOR UPDATE`), in plan order. */
export function lockLoops(plan: unknown): number[] {
  if (!plan || typeof plan !== "object") return [];
  const node = plan as Record<string, unknown>;
  const own = node["Node Type"] === "LockRows" ? [Number(node["Actual Loops"] ?? 0)] : [];
  return [
    ...own,
    ...Object.values(node).flatMap((value) =>
      (Array.isArray(value) ? value : [value]).flatMap((child) => lockLoops(child)),
    ),
  ];
}

/** How many nodes of the plan scan `jobs`: none means the walker read nothing of it. */
export function jobScans(plan: unknown): number {
  if (!plan || typeof plan !== "object") return 0;
  const node = plan as Record<string, unknown>;
  let scans = node["Relation Name"] === "jobs" ? 1 : 0;
  for (const value of Object.values(node)) {
    for (const child of Array.isArray(value) ? value : [value]) scans += jobScans(child);
  }
  return scans;
}

/**
 * Runs the statement under EXPLAIN ANALYZE and rolls it back: its executed plan. `planner`:
 * settings for this one statement (`enable_hashjoin: "off"`), to see what a plan the
 * statistics could lead to would do.
 */
export async function planOf(
  pool: pg.Pool,
  statement: SentStatement,
  planner: Record<string, string> = {},
) {
  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    for (const [name, value] of Object.entries(planner)) {
      await client.query("SELECT set_config($1, $2, true)", [name, value]);
    }
    const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement.sql}`, [
      ...statement.parameters,
    ]);
    return rows[0]["QUERY PLAN"] as unknown;
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
}
