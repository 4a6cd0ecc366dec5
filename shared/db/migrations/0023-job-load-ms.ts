import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import type { Migration } from "./types.ts";

/**
 * `jobs.load_ms` (issue 27): how long the job's latest run waited for its model to load on
 * its runner, as its report says; null when the model was loaded already. Shown as
 * `metrics.load_ms`.
 */
export const jobLoadMs: Migration = {
  name: "0023_job_load_ms",
  async up(db, dialect) {
    await addColumn(db, dialect, "jobs", "load_ms", sql`integer`);
  },
};
