import { instant, type Migration } from "./types.ts";

/**
 * The operator's switches per model (`POST /v1/admin/models/{id}/pause`): while a row says
 * paused, agents' claims of the model's jobs are refused (the jobs wait, unpublished, until
 * the resume republishes them) and, with `reject_new`, submits are refused with 503. A
 * table of its own, tiny (one row per model ever switched), read by every gateway.
 */
export const modelSwitches: Migration = {
  name: "0010_model_switches",
  async up(db, dialect) {
    await db.schema
      .createTable("model_switches")
      .ifNotExists()
      .addColumn("model", "text", (c) => c.primaryKey())
      .addColumn("paused_at", instant(dialect))
      .addColumn("reject_new", "integer", (c) => c.notNull().defaultTo(0))
      .addColumn("reason", "text")
      .addColumn("updated_at", instant(dialect), (c) => c.notNull())
      .execute();
  },
};
