import { type Kysely, sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordNonce } from "../../gateway/store/agent-nonces.ts";
import { markPublishedMany } from "../../gateway/store/job-batch-updates.ts";
import { KyselyJobStore, type NewJob } from "../../gateway/store/job-store.ts";
import { openDatabase } from "../../shared/db/open.ts";
import { dropPostgresSchema, openPostgres, parsePostgresUrl } from "../../shared/db/postgres.ts";
import type { Database } from "../../shared/db/schema.ts";
import { newId } from "../../shared/ids.ts";
import { freshPostgresUrl, openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * The JobStore's state machine on Postgres, where it differs from SQLite in what can go
 * wrong: bigint instants coming back as text, real concurrency between connections, and
 * migrations racing between processes that start together.
 */
const T0 = 1_750_000_000_000;
let database: Awaited<ReturnType<typeof openTestDatabase>>;
let store: KyselyJobStore;

beforeAll(async () => {
  database = await openTestDatabase("postgres");
  store = new KyselyJobStore(database.db);
});
afterAll(() => database?.close());

/** `insert`'s row, which must be one: not null (a conflict), nor undefined. */
function made<Row>(row: Row | null | undefined): Row {
  expect(row).not.toBeNull();
  expect(row).not.toBeUndefined();
  return row as Row;
}

const newJob = (overrides: Partial<NewJob> = {}): NewJob => ({
  id: newId("job", T0),
  tenantId: "ten_a",
  model: "noop",
  priority: 5,
  input: { n: 1 },
  webhook: null,
  idempotencyKey: null,
  requestHash: null,
  traceparent: null,
  now: T0,
  expiresAt: T0 + 3_600_000,
  ...overrides,
});

describe("JobStore on Postgres", () => {
  it("returns instants and counters as numbers, not bigint text", async () => {
    const job = newJob();
    const row = made(await store.insert(job));
    expect(row).toMatchObject({ id: job.id, tenant_id: "ten_a", status: "queued" });
    expect(row.created_at).toBe(T0);
    expect(row.expires_at).toBe(T0 + 3_600_000);
    const read = made(await store.byId(row.id));
    expect(read.created_at).toBe(T0);
    expect(read.last_seq).toBe(1);
    const events = await store.eventsAfter(row.id, 0);
    expect(events).toEqual([
      expect.objectContaining({ seq: 1, status: "queued", attempt: 0, at: T0 }),
    ]);
  });

  it("lets one of many concurrent claims win, and records one result", async () => {
    const { id } = made(await store.insert(newJob()));
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, i) => store.claim(id, `agent-${i}`, 1, T0 + 10)),
    );
    expect(claims.filter((c) => c.ok)).toHaveLength(1);
    const results = await Promise.all(
      Array.from({ length: 4 }, () => store.succeed(id, 1, { ok: true }, T0 + 20)),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    const statuses = (await store.eventsAfter(id, 0)).map((e) => e.status);
    expect(statuses).toEqual(["queued", "running", "succeeded"]);
    expect(await store.claims(id)).toBe(1);
  });

  it("marks published the jobs still queued, and neither locks nor writes the others", async () => {
    const queued = made(await store.insert(newJob()));
    const running = made(await store.insert(newJob()));
    expect((await store.claim(running.id, "agent-1", 1, T0 + 10)).ok).toBe(true);
    // A row lock writes the row's xmax: a mark that locked the running job would show there.
    const xmax = async (id: string) =>
      (
        await sql<{ xmax: string }>`SELECT xmax::text AS xmax FROM jobs WHERE id = ${id}`.execute(
          database.db,
        )
      ).rows[0]?.xmax;
    const before = await xmax(running.id);
    await markPublishedMany(database.db, 10_000, [queued.id, running.id], T0 + 50);
    expect(made(await store.byId(queued.id)).published_at).toBe(T0 + 50);
    expect(made(await store.byId(running.id)).published_at).toBeNull();
    expect(await xmax(running.id)).toBe(before);
  });

  it("refuses a reused Idempotency-Key without an error", async () => {
    const job = newJob({ id: newId("job", T0 + 1), idempotencyKey: "k1" });
    const first = made(await store.insert(job));
    expect(first).toMatchObject({ id: job.id, idempotency_key: "k1" });
    const second = await store.insert(newJob({ id: newId("job", T0 + 2), idempotencyKey: "k1" }));
    expect(second).toBeNull();
    // The key names the first job: a real row, read back, not two missing ones compared.
    const found = made(await store.byIdempotencyKey("ten_a", "k1"));
    expect(found.id).toBe(job.id);
    expect(await store.byIdempotencyKey("ten_a", "k-never-used")).toBeUndefined();
  });

  it("inserts concurrent submits together, each with its event, one winner per key", async () => {
    const jobs = Array.from({ length: 30 }, (_, i) =>
      newJob({
        id: newId("job", T0 + 5_000 + i),
        tenantId: "ten_group",
        // Every third job reuses one key: only the first of them may be inserted.
        idempotencyKey: i % 3 === 0 ? "shared" : `own-${i}`,
      }),
    );
    const rows = await Promise.all(jobs.map((job) => store.insert(job)));
    const inserted = rows.filter((row) => row !== null);
    expect(inserted).toHaveLength(21);
    expect(rows.filter((row, i) => i % 3 === 0 && row !== null)).toHaveLength(1);
    rows.forEach((row, i) => {
      if (row) expect(row.id).toBe(jobs[i]!.id);
    });
    const events = await database.db
      .selectFrom("job_events")
      .select("job_id")
      .where(
        "job_id",
        "in",
        jobs.map((job) => job.id),
      )
      .execute();
    expect(events.map((event) => event.job_id).sort()).toEqual(
      inserted.map((row) => row.id).sort(),
    );
  });

  it("claims and settles many jobs in one statement, each under the single-job conditions", async () => {
    const insert = async (overrides: Partial<NewJob> = {}) =>
      (await store.insert(newJob({ id: newId("job", T0 + 9_000), ...overrides })))!.id;
    const free = await insert();
    const other = await insert({ model: "ocr" });
    const expired = await insert({ expiresAt: T0 - 1 });
    const held = await insert();
    expect((await store.claim(held, "agent-b", 1, T0 + 1)).ok).toBe(true);
    const batch = [free, other, expired, held, free].map((id) => ({ id, attempt: 1 }));
    const claimed = await store.claimMany(batch, {
      agentId: "agent-a",
      now: T0 + 2,
      models: ["noop"],
    });
    expect(claimed.map((row) => row.id)).toEqual([free]);
    expect(claimed[0]).toMatchObject({ status: "running", agent_id: "agent-a", attempt: 1 });
    expect(typeof claimed[0]!.updated_at).toBe("number");

    const reports = [
      { id: free, attempt: 1, output: { text: "ok" } },
      { id: held, attempt: 1, output: { stolen: true } },
    ];
    const done = await store.succeedMany(reports, { agentId: "agent-a", now: T0 + 3 });
    expect(done.map((row) => [row.id, row.status, row.output])).toEqual([
      [free, "succeeded", JSON.stringify({ text: "ok" })],
    ]);
    expect((await store.byId(held))?.status).toBe("running");
    const events = (await store.eventsAfter(free, 0)).map((event) => event.status);
    expect(events).toEqual(["queued", "running", "succeeded"]);
    // D1 takes 100 parameters a statement: a store told so splits the batch.
    const small = new KyselyJobStore(database.db, { maxParameters: 12 });
    const many = await Promise.all(Array.from({ length: 7 }, () => insert()));
    const all = await small.claimMany(
      many.map((id) => ({ id, attempt: 1 })),
      { agentId: "agent-c", now: T0 + 4, models: ["noop"] },
    );
    expect(all.map((row) => row.id).sort()).toEqual([...many].sort());
  });

  it("never deadlocks when batches lock the same jobs in different orders", async () => {
    for (let round = 0; round < 5; round++) {
      const ids = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          store.insert(newJob({ id: newId("job", T0 + 20_000 + round * 100 + i) })),
        ),
      ).then((rows) => rows.map((row) => row!.id));
      const shuffled = [...ids].sort(() => Math.random() - 0.5);
      const claims = (order: string[], agentId: string) =>
        store.claimMany(
          order.map((id) => ({ id, attempt: 1 })),
          { agentId, now: T0 + 30_000, models: ["noop"] },
        );
      const [a, b] = await Promise.all([
        claims(shuffled, "agent-a"),
        claims([...shuffled].reverse(), "agent-b"),
        markPublishedMany(database.db, 10_000, [...ids].reverse(), T0 + 30_000),
        markPublishedMany(database.db, 10_000, shuffled, T0 + 30_000),
      ]);
      // Each job went to exactly one of the two agents.
      expect(a.length + b.length).toBe(ids.length);
    }
  });

  it("finds stale running jobs and takes one back only while it is still stale", async () => {
    const { id } = made(await store.insert(newJob()));
    const claimed = await store.claim(id, "agent-x", 1, T0 + 100);
    expect(claimed.ok).toBe(true);
    const stale = (await store.staleRunning(T0 + 200, 100)).find((r) => r.id === id);
    expect(stale).toBeDefined();
    // A heartbeat lands between the sweeper's read and its update: the heartbeat wins.
    await store.heartbeat(id, 1, T0 + 300);
    const error = { type: "transient" as const, code: "agent_lost", message: "silent" };
    const lost = await store.reclaimStale(stale!, T0 + 200, error, true, T0 + 400);
    expect(lost.ok).toBe(false);
    const taken = await store.reclaimStale(stale!, T0 + 350, error, true, T0 + 400);
    expect(taken.ok && taken.job).toMatchObject({ status: "queued", published_at: null });
    expect(JSON.parse((taken.ok && taken.job.error) || "null")).toEqual(error);
  });

  it("keeps agent nonces out of the write-ahead log, and still refuses a replayed one", async () => {
    const persistence = await sql<{ relpersistence: string }>`
      SELECT relpersistence FROM pg_class
      WHERE oid = to_regclass(current_schema() || '.agent_nonces')`.execute(database.db);
    expect(persistence.rows).toEqual([{ relpersistence: "u" }]);
    const entry = { agentId: "agt_1", nonce: "n-1", expiresAt: T0 + 300_000 };
    expect(await recordNonce(database.db, entry, T0)).toBe(true);
    expect(await recordNonce(database.db, entry, T0)).toBe(false);
  });

  it("lists newest first with a cursor", async () => {
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const row = made(
        await store.insert(newJob({ id: newId("job", T0 + 1000 + i), tenantId: "ten_l" })),
      );
      ids.push(row.id);
    }
    const page = await store.list("ten_l", { limit: 2 });
    expect(page.map((r) => r.id)).toEqual([ids[2], ids[1]]);
    const next = await store.list("ten_l", { limit: 2, before: ids[1] });
    expect(next.map((r) => r.id)).toEqual([ids[0]]);
  });
});

describe("openDatabase on Postgres", () => {
  it("migrates once when several processes open a new schema at the same moment", async () => {
    const fresh = freshPostgresUrl("gantry_race");
    try {
      const opened = await Promise.all(Array.from({ length: 4 }, () => openDatabase(fresh.url)));
      const migrations = await opened[0]!.db
        .selectFrom("gantry_migrations")
        .select("name")
        .execute();
      expect(new Set(migrations.map((m) => m.name)).size).toBe(migrations.length);
      const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(
        opened[0]!.db,
      );
      expect(rows[0]?.schema).toBe(fresh.schema);
      await Promise.all(opened.map((o) => o.close()));
    } finally {
      await dropPostgresSchema(fresh.url, fresh.schema);
    }
  });

  it("keeps the password out of descriptions and refuses a bad schema name", () => {
    const target = parsePostgresUrl("postgres://u:secret@db.example:5432/gantry?schema=prod");
    expect(target.description).not.toContain("secret");
    expect(target.description).toContain("schema=prod");
    expect(target.connectionString).not.toContain("schema");
    expect(() => parsePostgresUrl("postgres://h/db?schema=a;drop")).toThrow(/schema/);
  });
});

describe("named prepared statements on Postgres", () => {
  async function withDatabase(
    query: string,
    use: (db: Kysely<Database>, url: string) => Promise<void>,
  ): Promise<void> {
    const { url, schema } = freshPostgresUrl();
    // One connection, so what one query prepared is what the next sees.
    const db = await openPostgres(`${url}${query}`, { maxConnections: 1 });
    try {
      await use(db, url);
    } finally {
      await db.destroy();
      await dropPostgresSchema(url, schema);
    }
  }
  const preparedTexts = async (db: Kysely<Database>) =>
    (
      await sql<{ statement: string }>`
        SELECT statement FROM pg_prepared_statements WHERE name LIKE 'gantry_%'`.execute(db)
    ).rows.map((row) => row.statement);

  it("prepares a statement once per connection and reuses it", async () => {
    await withDatabase("", async (db) => {
      const store = new KyselyJobStore(db);
      await store.insert(newJob());
      await store.insert(newJob());
      const texts = await preparedTexts(db);
      const inserts = texts.filter((text) => /^\s*insert into "?jobs"?\s/i.test(text));
      expect(inserts).toHaveLength(1);
    });
  });

  it("prepares nothing with ?prepare=false", async () => {
    await withDatabase("&prepare=false", async (db) => {
      await new KyselyJobStore(db).insert(newJob());
      expect(await preparedTexts(db)).toEqual([]);
    });
    expect(() => parsePostgresUrl("postgres://h/db?prepare=maybe")).toThrow(/prepare/);
  });

  it("prepares afresh a statement whose columns another process changed", async () => {
    await withDatabase("", async (db, url) => {
      await sql`CREATE TABLE widgets (id int)`.execute(db);
      await sql`INSERT INTO widgets VALUES (1)`.execute(db);
      const all = () => sql<Record<string, unknown>>`SELECT * FROM widgets`.execute(db);
      expect((await all()).rows).toEqual([{ id: 1 }]);

      const other = await openPostgres(url, { maxConnections: 1, migrate: false });
      await sql`ALTER TABLE widgets ADD COLUMN colour text DEFAULT 'red'`.execute(other);
      await other.destroy();

      expect((await all()).rows).toEqual([{ id: 1, colour: "red" }]);
    });
  });
});
