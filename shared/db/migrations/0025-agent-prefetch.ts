import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import type { Migration } from "./types.ts";

/**
 * `agents.prefetch` (issue 26): how many jobs the agent takes from the queue at once, as it
 * registered. A model's release window grows to what its live agents read ahead.
 */
export const agentPrefetch: Migration = {
  name: "0025_agent_prefetch",
  async up(db, dialect) {
    await addColumn(db, dialect, "agents", "prefetch", sql`integer`);
  },
};
