import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import type { Migration } from "./types.ts";

/**
 * A job's metadata: the client's own labels (JSON object of strings, at most 16 keys), kept
 * on the job so that it comes back on the job resource and in webhooks. Filters on it run
 * within one tenant's jobs (the `jobs_tenant_id` index narrows them first), so no index of
 * its own.
 */
export const jobMetadata: Migration = {
  name: "0007_job_metadata",
  async up(db, dialect) {
    await addColumn(db, dialect, "jobs", "metadata", sql`text`);
  },
};
