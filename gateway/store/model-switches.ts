import type { Kysely, Selectable } from "kysely";
import type { Database, ModelSwitchTable } from "../../shared/db/schema.ts";

export type ModelSwitchRow = Selectable<ModelSwitchTable>;

/** Every model paused now (a handful at most: the table holds one row per model switched). */
export function pausedModels(db: Kysely<Database>): Promise<ModelSwitchRow[]> {
  return db.selectFrom("model_switches").selectAll().where("paused_at", "is not", null).execute();
}

/** Pauses a model, or changes how (`reject_new`, `reason`) while it stays paused. */
export async function pauseModel(
  db: Kysely<Database>,
  model: string,
  options: { rejectNew: boolean; reason: string | null },
  now: number,
): Promise<ModelSwitchRow> {
  const values = {
    reject_new: options.rejectNew ? 1 : 0,
    reason: options.reason,
    updated_at: now,
  };
  return db
    .insertInto("model_switches")
    .values({ model, paused_at: now, ...values })
    .onConflict((oc) =>
      oc.column("model").doUpdateSet((eb) => ({
        ...values,
        // Pausing a paused model keeps when it was first paused.
        paused_at: eb.fn.coalesce("model_switches.paused_at", eb.val(now)),
      })),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Resumes a model; false when it was not paused. */
export async function resumeModel(
  db: Kysely<Database>,
  model: string,
  now: number,
): Promise<boolean> {
  const result = await db
    .updateTable("model_switches")
    .set({ paused_at: null, reject_new: 0, reason: null, updated_at: now })
    .where("model", "=", model)
    .where("paused_at", "is not", null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * A queued job whose claim was refused because its model is paused: its message is gone
 * (the agent acks a refusal), so it is marked unpublished for the outbox, which leaves
 * paused models alone and republishes it once the model is resumed.
 */
export async function markUnpublished(db: Kysely<Database>, id: string): Promise<void> {
  await db
    .updateTable("jobs")
    .set({ published_at: null })
    .where("id", "=", id)
    .where("status", "=", "queued")
    .execute();
}

/** Queued job ids of a model in id order after `after`: one bounded pass of a purge. */
export async function queuedIds(
  db: Kysely<Database>,
  model: string,
  after: string | null,
  limit: number,
): Promise<{ id: string; tenant_id: string }[]> {
  let query = db
    .selectFrom("jobs")
    .select(["id", "tenant_id"])
    .where("status", "=", "queued")
    .where("model", "=", model)
    .orderBy("id")
    .limit(limit);
  if (after) query = query.where("id", ">", after);
  return query.execute();
}

/**
 * On resume: the model's released jobs are held again, to go out in fair order within their
 * tenants' `max_running_jobs` (gateway/jobs/release.ts). While the model was paused they held
 * no place under the bound (release-line.ts `HOLDS_PLACE`), so the tenant's other models may
 * have taken those places; let out as they were, they would all start at once, past it.
 * Their messages are gone or stale: agents' claims during the pause were refused, and a
 * claim of a held job is refused (job-transitions.ts `claim`); a release publishes anew. A
 * job whose message did survive gets a second one, which agents tolerate.
 */
export async function holdModel(db: Kysely<Database>, model: string): Promise<void> {
  await db
    .updateTable("jobs")
    .set({ released_at: null, published_at: null })
    .where("status", "=", "queued")
    .where("model", "=", model)
    .where("released_at", "is not", null)
    .execute();
}

/** Queued and running jobs of one model (the queued count reads the position index). */
export async function modelJobCounts(
  db: Kysely<Database>,
  model: string,
): Promise<{ queued: number; running: number }> {
  const count = (status: string) =>
    db
      .selectFrom("jobs")
      .select((eb) => eb.fn.countAll<number | string>().as("n"))
      .where("status", "=", status)
      .where("model", "=", model)
      .executeTakeFirst();
  const [queued, running] = await Promise.all([count("queued"), count("running")]);
  return { queued: Number(queued?.n ?? 0), running: Number(running?.n ?? 0) };
}
