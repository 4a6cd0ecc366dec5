import { sql } from "kysely";
import { addColumn } from "./0002-tenants-plans-keys.ts";
import { instant, type Migration } from "./types.ts";

/**
 * Fair release (gateway/jobs/release.ts): a queued job is held in the store until the
 * releaser picks it for the broker, in weighted round robin by tenant and, inside a tenant,
 * by `fairness_key`.
 *
 * - `released_at`: when the releaser handed the job to the broker; null while it is held.
 *   Jobs queued before this migration are taken as released (their message is out).
 * - `jobs_held`: the held jobs of a model by band, tenant and key, oldest first: the
 *   releaser's lanes. Partial, so it holds only what waits in the store.
 * - `jobs_active`: running and released jobs by tenant and model: a tenant's count against
 *   `max_running_jobs` and its share of a model. It holds what agents hold or are about to
 *   take, so it stays small however long the backlog.
 * - `jobs_window`: a model's released jobs not yet taken: its release window.
 * - `jobs_release_outbox`: released jobs whose publish was never confirmed (a gateway that
 *   died in the middle of a release): the outbox publishes them.
 */
export const fairRelease: Migration = {
  name: "0020_fair_release",
  async up(db, dialect) {
    await addColumn(db, dialect, "jobs", "fairness_key", sql`text`);
    await addColumn(db, dialect, "jobs", "released_at", sql.raw(instant(dialect)));
    await sql`
      UPDATE jobs SET released_at = COALESCE(published_at, created_at)
      WHERE status = 'queued' AND released_at IS NULL`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_held ON jobs (model, priority, tenant_id, fairness_key, id)
      WHERE status = 'queued' AND released_at IS NULL`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_active ON jobs (tenant_id, model, fairness_key)
      WHERE status = 'running' OR (status = 'queued' AND released_at IS NOT NULL)`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_window ON jobs (model)
      WHERE status = 'queued' AND released_at IS NOT NULL`.execute(db);
    await sql`
      CREATE INDEX IF NOT EXISTS jobs_release_outbox ON jobs (released_at)
      WHERE status = 'queued' AND published_at IS NULL AND released_at IS NOT NULL`.execute(db);
  },
};
