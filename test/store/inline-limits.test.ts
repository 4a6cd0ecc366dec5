/**
 * On the embedded SQLite database a query's LIMIT (and OFFSET) is written into its SQL text,
 * built queries' and raw ones' (`limitClause`) alike: SQLite plans a statement with the value
 * bound to `LIMIT ?` and so compiles it again on every run, and the hot path's claims, feed
 * reads and releases were recompiled on every call (shared/db/inline-limits.ts). Postgres keeps
 * it a parameter, its named statements one per text (pg-prepared.ts). And the statement cache
 * that the texts of many limits fill drops one seldom used, never a hot one.
 */
import type SqliteDatabase from "better-sqlite3";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { limitClause } from "../../shared/db/inline-limits.ts";
import { withStatementCache } from "../../shared/db/sqlite.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

const NUMBERS = sql<{ n: number }>`
  SELECT n FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4) numbers
  ORDER BY n`;

describe.each(["sqlite", "postgres"] as const)("limits on %s", (kind) => {
  const sqlite = kind === "sqlite";
  const sent: string[] = [];
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  beforeAll(async () => {
    database = await openTestDatabase(kind, { onStatement: (text) => sent.push(text) });
  });
  afterAll(() => database?.close());

  it("are written into the text on SQLite, and bound on Postgres", async () => {
    const { db } = database;
    sent.length = 0;

    await db.selectFrom("jobs").select("id").orderBy("id").limit(2).offset(1).execute();
    const built = sent.at(-1) ?? "";
    if (sqlite) expect(built).toMatch(/ limit 2 offset 1$/);
    else expect(built).toMatch(/ limit \$\d+ offset \$\d+$/);

    const { rows } = await sql<{ n: number }>`${NUMBERS} ${limitClause(3)}`.execute(db);
    expect(rows.map((row) => Number(row.n))).toEqual([1, 2, 3]);
    const raw = sent.at(-1) ?? "";
    if (sqlite) expect(raw).toMatch(/ limit 3$/);
    else expect(raw).toMatch(/ limit \$1$/);

    // A claim's subquery, as the sql queue's lease sends it.
    await db
      .updateTable("queue_messages")
      .set({ attempts: 0 })
      .where("seq", "in", db.selectFrom("queue_messages").select("seq").orderBy("seq").limit(7))
      .execute();
    const nested = sent.at(-1) ?? "";
    expect(nested).toContain(sqlite ? "limit 7)" : "limit $");
  });
});

describe("the SQLite statement cache", () => {
  it("keeps a statement in use while hundreds of others come and go", () => {
    const prepared = new Map<string, number>();
    const fake = {
      prepare(text: string) {
        prepared.set(text, (prepared.get(text) ?? 0) + 1);
        return { text } as unknown as SqliteDatabase.Statement;
      },
      close() {},
    } as unknown as SqliteDatabase.Database;
    const cache = withStatementCache(fake);
    for (let n = 1; n <= 1200; n++) {
      cache.prepare("SELECT hot");
      cache.prepare(`SELECT ${n} LIMIT ${n}`);
    }
    expect(prepared.get("SELECT hot")).toBe(1);
    // The cold ones went, oldest first: the first is prepared again, the newest is kept.
    cache.prepare("SELECT 1 LIMIT 1");
    cache.prepare("SELECT 1200 LIMIT 1200");
    expect(prepared.get("SELECT 1 LIMIT 1")).toBe(2);
    expect(prepared.get("SELECT 1200 LIMIT 1200")).toBe(1);
  });
});
