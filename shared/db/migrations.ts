import { type Kysely, sql } from "kysely";
import { initial } from "./migrations/0001-initial.ts";
import { tenantsPlansKeys } from "./migrations/0002-tenants-plans-keys.ts";
import { webhookSafety } from "./migrations/0003-webhook-safety.ts";
import { agents } from "./migrations/0004-agents.ts";
import { jobEventTriggers } from "./migrations/0005-job-event-triggers.ts";
import { unloggedNonces } from "./migrations/0006-unlogged-nonces.ts";
import { jobMetadata } from "./migrations/0007-job-metadata.ts";
import { changeFeed } from "./migrations/0008-change-feed.ts";
import { jobStanding } from "./migrations/0009-job-standing.ts";
import { modelSwitches } from "./migrations/0010-model-switches.ts";
import { webhookOutbox } from "./migrations/0011-webhook-outbox.ts";
import { batches } from "./migrations/0012-batches.ts";
import { retention } from "./migrations/0013-retention.ts";
import { jobTimeout } from "./migrations/0014-job-timeout.ts";
import { jobProgress } from "./migrations/0015-job-progress.ts";
import { batchIdempotency } from "./migrations/0016-batch-idempotency.ts";
import { retentionRetries } from "./migrations/0017-retention-retries.ts";
import { webhookAttemptReason } from "./migrations/0018-webhook-attempt-reason.ts";
import { gatewaySecrets } from "./migrations/0019-gateway-secrets.ts";
import { fairRelease } from "./migrations/0020-fair-release.ts";
import { agentDevices } from "./migrations/0021-agent-devices.ts";
import { usage } from "./migrations/0022-usage.ts";
import { jobLoadMs } from "./migrations/0023-job-load-ms.ts";
import { activeJobIndexes } from "./migrations/0024-active-job-indexes.ts";
import { agentPrefetch } from "./migrations/0025-agent-prefetch.ts";
import { insertReleased } from "./migrations/0026-insert-released.ts";
import { leanJobIndexes } from "./migrations/0027-lean-job-indexes.ts";
import { insertGenericPlans } from "./migrations/0028-insert-generic-plans.ts";
import { quietAnnouncements } from "./migrations/0029-quiet-announcements.ts";
import { unusedQueuedEntries } from "./migrations/0030-unused-queued-entries.ts";
import { endedBatches } from "./migrations/0031-ended-batches.ts";
import { instant, type Migration, type SqlDialect } from "./migrations/types.ts";
import type { Database } from "./schema.ts";

export type { SqlDialect } from "./migrations/types.ts";

/** In order; append new migrations, never edit an applied one. */
const MIGRATIONS: Migration[] = [
  initial,
  tenantsPlansKeys,
  webhookSafety,
  agents,
  jobEventTriggers,
  unloggedNonces,
  jobMetadata,
  changeFeed,
  jobStanding,
  modelSwitches,
  webhookOutbox,
  batches,
  retention,
  jobTimeout,
  jobProgress,
  batchIdempotency,
  retentionRetries,
  webhookAttemptReason,
  gatewaySecrets,
  fairRelease,
  agentDevices,
  usage,
  jobLoadMs,
  activeJobIndexes,
  agentPrefetch,
  insertReleased,
  leanJobIndexes,
  insertGenericPlans,
  quietAnnouncements,
  unusedQueuedEntries,
  endedBatches,
];

/**
 * Applies pending migrations in order. Hand-rolled rather than Kysely's Migrator because
 * D1 has no interactive transactions; every step is idempotent (`if not exists`) so a
 * crash between a step and its record is harmless.
 */
export async function migrate(db: Kysely<Database>, dialect: SqlDialect): Promise<string[]> {
  await db.schema
    .createTable("gantry_migrations")
    .ifNotExists()
    .addColumn("name", "text", (c) => c.primaryKey())
    .addColumn("applied_at", instant(dialect), (c) => c.notNull())
    .execute();
  const done = new Set(
    (await db.selectFrom("gantry_migrations").select("name").execute()).map((r) => r.name),
  );
  const applied: string[] = [];
  for (const migration of MIGRATIONS) {
    if (done.has(migration.name)) continue;
    await migration.up(db, dialect);
    await db
      .insertInto("gantry_migrations")
      .values({ name: migration.name, applied_at: Date.now() })
      .onConflict((oc) => oc.column("name").doNothing())
      .execute();
    applied.push(migration.name);
  }
  return applied;
}

/** For tests and `readyz`: a cheap round trip. */
export async function ping(db: Kysely<Database>): Promise<void> {
  await sql`select 1`.execute(db);
}
