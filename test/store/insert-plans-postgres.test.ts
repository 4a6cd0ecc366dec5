/**
 * `gantry_insert_jobs` plans its statements once per connection (migration 0028): Postgres
 * otherwise kept planning the release decision anew on about a third of the submits, at
 * about a millisecond of its CPU each. The setting is the function's own, so it holds on
 * every connection, whatever the role or server default says.
 */
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingDatabase } from "../helpers/plan-rows.ts";

let rig: Awaited<ReturnType<typeof recordingDatabase>>;

beforeAll(async () => {
  rig = await recordingDatabase("gantry_insertplans");
});
afterAll(() => rig?.close());

describe("gantry_insert_jobs on Postgres", () => {
  it("runs with generic plans only", async () => {
    const { rows } = await sql<{ proconfig: string[] | null }>`
      SELECT proconfig FROM pg_proc
      WHERE proname = 'gantry_insert_jobs' AND pronamespace = current_schema()::regnamespace`.execute(
      rig.db,
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]?.proconfig).toContain("plan_cache_mode=force_generic_plan");
  });
});
