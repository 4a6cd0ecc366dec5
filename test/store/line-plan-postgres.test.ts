/**
 * The checkpoints of a model's line (job-standing.ts: every 1 000th queued job in the order
 * agents take them, re-read every 2 s while anyone asks where a job stands) are read in the
 * index's order (`jobs_queue_line`, migration 0027). The index before it ascended in priority
 * where the line descends, so every read sorted the whole line: 110–140 ms for 50 000 queued
 * jobs, spilled to disk, against 50 ms without the sort. Checked on the executed plan.
 */
import { type Kysely, sql } from "kysely";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { queueCheckpoints } from "../../gateway/store/job-standing.ts";
import type { Database } from "../../shared/db/schema.ts";
import { planOf, recordingDatabase, type SentStatement } from "../helpers/plan-rows.ts";

let rig: Awaited<ReturnType<typeof recordingDatabase>>;
let pool: pg.Pool;
let db: Kysely<Database>;
let sent: SentStatement[];

const QUEUED = 20_000;

beforeAll(async () => {
  rig = await recordingDatabase("gantry_lineplan");
  ({ pool, db, sent } = rig);
  // Three priorities, interleaved in age: the line is every 9, then every 5, then every 1.
  await sql`
    INSERT INTO jobs (id, tenant_id, model, status, priority, input, attempt, created_at,
      updated_at, expires_at, last_seq)
    SELECT 'job_' || lpad(n::text, 8, '0'), 'ten_line', 'noop', 'queued',
      (ARRAY[1, 5, 9])[n % 3 + 1], '{}', 0, n, n, 9999999999999, 1
    FROM generate_series(1, ${QUEUED}::bigint) AS n`.execute(db);
  await sql`ANALYZE jobs`.execute(db);
});
afterAll(() => rig?.close());

/** The most rows any Sort node of the plan sorted. */
function largestSort(plan: unknown): number {
  if (!plan || typeof plan !== "object") return 0;
  const node = plan as Record<string, unknown>;
  let largest = node["Node Type"] === "Sort" ? Number(node["Actual Rows"] ?? 0) : 0;
  for (const value of Object.values(node)) {
    for (const child of Array.isArray(value) ? value : [value]) {
      largest = Math.max(largest, largestSort(child));
    }
  }
  return largest;
}

describe("a model's line on Postgres", () => {
  it("gives its checkpoints in line order, sorting only the checkpoints", async () => {
    sent.length = 0;
    const marks = await queueCheckpoints(db, "noop", 1_000);
    expect(marks).toHaveLength(QUEUED / 1_000);
    expect(marks.map((mark) => mark.rank)).toEqual(marks.map((_, i) => (i + 1) * 1_000));
    // The first 6 667 are priority 9, by age: the 1 000th is the 1 000th of them.
    expect(marks[0]).toMatchObject({
      priority: 9,
      id: `job_${String(2 + 3 * 999).padStart(8, "0")}`,
    });
    const statement = sent.find((query) => /row_number\(\)/.test(query.sql));
    if (!statement) throw new Error("no checkpoint statement was sent");
    expect(largestSort(await planOf(pool, statement))).toBeLessThanOrEqual(QUEUED / 1_000);
  });
});
