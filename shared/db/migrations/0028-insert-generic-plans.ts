import { sql } from "kysely";
import { GENERIC_PLANS } from "./0026-insert-released.ts";
import type { Migration } from "./types.ts";

/**
 * `gantry_insert_jobs` (Postgres) runs its statements with generic plans, made once per
 * connection, and never plans them again per submit (issue 29).
 *
 * PL/pgSQL caches a plan per statement, but Postgres decides call by call between that
 * generic plan and a custom one made for the arguments at hand, keeping custom plans while
 * they look cheaper. For the release decision (a CTE over the submitted jobs' JSON) they
 * always looked cheaper, the JSON's row count being unknown to the generic plan, so it was
 * planned again on about a third of the submits, at about a millisecond of Postgres's CPU
 * each: measured with pg_stat_statements (track = all) during the paced phase of
 * bench/queue-e2e.ts, 996 plans for 3 663 calls and 962 ms of planning, against 31 plans and
 * 43 ms with generic plans only, their execution no slower (669 against 748 ms). Its
 * statements name their statuses as constants and read through the partial indexes those
 * select, which no argument changes: auto_explain showed the generic plan to be the custom
 * one, node for node.
 */
export const insertGenericPlans: Migration = {
  name: "0028_insert_generic_plans",
  async up(db, dialect) {
    if (dialect !== "postgres") return;
    await sql`ALTER FUNCTION gantry_insert_jobs(bigint, jsonb, bigint) ${GENERIC_PLANS}`.execute(
      db,
    );
  },
};
