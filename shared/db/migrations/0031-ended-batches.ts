import { sql } from "kysely";
import type { Migration } from "./types.ts";

/**
 * Retention deletes batches that ended long ago and have no job left
 * (gateway/store/retention-batches.ts): it reads the oldest ended ones first, from this index,
 * rather than scan every batch each pass. A batch in progress is not in it.
 */
export const endedBatches: Migration = {
  name: "0031_ended_batches",
  async up(db) {
    await sql`CREATE INDEX IF NOT EXISTS batches_ended ON batches (completed_at)
      WHERE completed_at IS NOT NULL`.execute(db);
  },
};
