import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KyselyJobStore } from "../../gateway/store/job-store.ts";
import { newId } from "../../shared/ids.ts";
import { newJob } from "../conformance/stores-jobs.ts";
import { openTestDatabase } from "../helpers/test-gateway.ts";

/**
 * What a job costs the indexes of `jobs` (issue 29 #2). Every change of a job moves an
 * indexed column, so no version of its row is a HOT update: each version gets an entry in
 * every index whose predicate it meets. The test takes the five versions of a job that runs
 * once (held, released, published, running, succeeded, no Idempotency-Key), each as the store
 * writes it, and counts the entries they make, index by index, from the catalog's own
 * predicates: an index added later shows here with its cost.
 */
const T0 = 1_750_000_000_000;
let database: Awaited<ReturnType<typeof openTestDatabase>>;
let store: KyselyJobStore;

beforeAll(async () => {
  database = await openTestDatabase("postgres");
  store = new KyselyJobStore(database.db);
});
afterAll(() => database?.close());

/** The indexes a job's versions can reach: every job, since listings read any state. */
const FOR_EVERY_JOB = ["jobs_pkey", "jobs_tenant_id", "jobs_tenant_status"];

describe("index entries per job on Postgres", () => {
  it("a job that runs once writes 32 entries, and only the listings' indexes hold every job", async () => {
    const db = database.db;
    await sql`CREATE TABLE job_versions (LIKE jobs)`.execute(db);
    const keep = (id: string) =>
      sql`INSERT INTO job_versions SELECT * FROM jobs WHERE id = ${id}`.execute(db);

    const id = newId("job", T0);
    const inserted = await store.insert(
      newJob({ id, tenantId: "ten_idx", now: T0, expiresAt: T0 + 3_600_000, held: true }),
    );
    expect(inserted?.released_at).toBeNull();
    await keep(id);
    // What a release pass writes (job-release.ts): the job is out in the window.
    await sql`UPDATE jobs SET released_at = ${T0 + 1} WHERE id = ${id}`.execute(db);
    await keep(id);
    await store.markPublished(id, T0 + 2);
    await keep(id);
    expect((await store.claim(id, "agent-1", 1, T0 + 3)).ok).toBe(true);
    await keep(id);
    expect((await store.succeed(id, 1, { ok: true }, T0 + 4)).ok).toBe(true);
    await keep(id);

    const indexes = await sql<{ name: string; predicate: string | null }>`
      SELECT c.relname AS name, pg_get_expr(i.indpred, i.indrelid) AS predicate
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indrelid = 'jobs'::regclass ORDER BY c.relname`.execute(db);
    const entries = new Map<string, number>();
    for (const { name, predicate } of indexes.rows) {
      const where = sql.raw(predicate ?? "true");
      const { rows } = await sql<{ n: string }>`
        SELECT count(*)::text AS n FROM job_versions WHERE ${where}`.execute(db);
      entries.set(name, Number(rows[0]?.n));
    }
    const everyJob = indexes.rows.filter((index) => index.predicate === null);
    expect(everyJob.map((index) => index.name).sort()).toEqual(FOR_EVERY_JOB);
    const total = [...entries.values()].reduce((sum, n) => sum + n, 0);
    // 48 before migration 0027 (key, unstarted and queued-count entries); 37 before 0030
    // (`jobs_outbox` for the held and released versions, the silent-queued index for all three
    // queued ones).
    expect({ total, entries: Object.fromEntries(entries) }).toMatchObject({ total: 32 });
  });
});
