import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import type { Migration } from "./types.ts";

/**
 * A job's execution limit (`timeout_seconds`): the one it was submitted with, or its task's
 * default, and whether it was the default (1), which an agent's own model config may then
 * override. Both null on jobs made before this migration: the agent decides for those.
 */
export const jobTimeout: Migration = {
  name: "0014_job_timeout",
  async up(db, dialect) {
    await addColumn(db, dialect, "jobs", "timeout_seconds", sql`integer`);
    await addColumn(db, dialect, "jobs", "timeout_default", sql`integer`);
  },
};
