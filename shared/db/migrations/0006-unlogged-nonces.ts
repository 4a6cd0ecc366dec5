import { sql } from "kysely";
import type { Migration } from "./types.ts";

/**
 * Agent request nonces skip Postgres's write-ahead log.
 *
 * Every signed agent request records its nonce before the gateway acts on it: on the hot
 * path that is one insert per claim and per report, each a commit of its own that waited
 * for a WAL flush (an fsync) before the job's real work could start. An unlogged table
 * commits without one. What that gives up: after a database crash the table comes back
 * empty, so a request captured in the minutes before the crash could be replayed until its
 * timestamp goes stale (the signature window); a nonce protects a window, not history.
 * Replicas do not see unlogged tables, which is fine: only the primary takes writes.
 *
 * SQLite and D1 keep theirs: an in-process commit there costs no network round trip, and
 * D1 has no such table kind.
 */
export const unloggedNonces: Migration = {
  name: "0006_unlogged_nonces",
  async up(db, dialect) {
    if (dialect !== "postgres") return;
    await sql`ALTER TABLE agent_nonces SET UNLOGGED`.execute(db);
  },
};
