import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import SqliteDatabase from "better-sqlite3";
import { CompiledQuery, Kysely, SqliteDialect, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { silentQueued } from "../../gateway/store/job-reads.ts";
import { openDatabase } from "../../shared/db/open.ts";
import type { Database } from "../../shared/db/schema.ts";
import { newId } from "../../shared/ids.ts";
import { recordingDatabase, type SentStatement } from "../helpers/plan-rows.ts";

/**
 * Migration 0030: no job enters an index while queued that no reader asks for there.
 * `jobs_outbox` is gone, and the silent-queued pass reads the retried queued jobs through
 * `jobs_requeued_updated`, which a fresh job (attempt 0) never enters, on both dialects.
 */
const T0 = 1_760_000_000_000;

interface Backend {
  db: Kysely<Database>;
  sent: SentStatement[];
  indexes(): Promise<Map<string, string>>;
  plan(query: SentStatement): Promise<string>;
  close(): Promise<void>;
}

async function sqliteBackend(): Promise<Backend> {
  const dir = mkdtempSync(join(tmpdir(), "gantry-queued-indexes-"));
  const path = join(dir, "gantry.db");
  await (await openDatabase(path)).close();
  const raw = new SqliteDatabase(path);
  const sent: SentStatement[] = [];
  const db = new Kysely<Database>({
    dialect: new SqliteDialect({ database: raw }),
    log: (event) => {
      if (event.level === "query") sent.push(event.query);
    },
  });
  return {
    db,
    sent,
    async indexes() {
      const rows = raw
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'")
        .all() as { name: string; sql: string | null }[];
      return new Map(rows.map((row) => [row.name, row.sql ?? ""]));
    },
    async plan(query) {
      const rows = raw.prepare(`EXPLAIN QUERY PLAN ${query.sql}`).all(...query.parameters) as {
        detail: string;
      }[];
      return rows.map((row) => row.detail).join(" | ");
    },
    async close() {
      await db.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresBackend(): Promise<Backend> {
  const recording = await recordingDatabase("gantry_queued_indexes");
  const { db } = recording;
  return {
    db,
    sent: recording.sent,
    async indexes() {
      const { rows } = await sql<{ indexname: string; indexdef: string }>`
        SELECT indexname, indexdef FROM pg_indexes
        WHERE schemaname = current_schema() AND tablename = 'jobs'`.execute(db);
      return new Map(rows.map((row) => [row.indexname, row.indexdef]));
    },
    async plan(query) {
      // With an empty table a scan of it is cheapest; the question is which index it can use.
      return db.connection().execute(async (connection) => {
        await sql`SET enable_seqscan = off`.execute(connection);
        const { rows } = await connection.executeQuery<{ "QUERY PLAN": string }>(
          CompiledQuery.raw(`EXPLAIN ${query.sql}`, [...query.parameters]),
        );
        await sql`RESET enable_seqscan`.execute(connection);
        return rows.map((row) => row["QUERY PLAN"]).join(" | ");
      });
    },
    close: () => recording.close(),
  };
}

describe.each([
  ["sqlite", sqliteBackend],
  ["postgres", postgresBackend],
] as const)("the queued jobs' indexes on %s", (_kind, open) => {
  let backend: Backend;
  beforeAll(async () => {
    backend = await open();
  });
  afterAll(async () => {
    await backend?.close();
  });

  it("has no outbox index over every queued job, and the silent-queued one holds retried jobs only", async () => {
    const indexes = await backend.indexes();
    expect(indexes.has("jobs_outbox")).toBe(false);
    expect(indexes.has("jobs_queued_updated")).toBe(false);
    expect(indexes.get("jobs_requeued_updated")).toMatch(/attempt\)? > 0/);
  });

  it("finds the silent retried job through that index, and not the fresh one", async () => {
    const row = (id: string, attempt: number) => ({
      id,
      tenant_id: "ten_indexes",
      model: "noop",
      status: "queued",
      priority: 1,
      input: "{}",
      attempt,
      created_at: T0,
      updated_at: T0,
      expires_at: T0 + 86_400_000,
      published_at: T0,
      released_at: T0,
      last_seq: 1,
    });
    const retried = newId("job", T0);
    await backend.db
      .insertInto("jobs")
      .values([row(retried, 1), row(newId("job", T0 + 1), 0)])
      .execute();
    backend.sent.length = 0;
    const found = await silentQueued(backend.db, T0 + 60_000, 10);
    expect(found.map((job) => job.id)).toEqual([retried]);
    const [query] = backend.sent;
    if (!query) throw new Error("silentQueued sent nothing");
    expect(await backend.plan(query)).toContain("jobs_requeued_updated");
  });
});
