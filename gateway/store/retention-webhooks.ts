import { type Kysely, sql } from "kysely";
import { limitClause } from "../../shared/db/inline-limits.ts";
import type { Database } from "../../shared/db/schema.ts";
import { chunked, scopeCondition } from "./retention-jobs.ts";
import type { RetentionScope } from "./retention-leases.ts";

/**
 * A batch's or a month's id, each as a prefix range the job_id indexes can seek (not a scan of
 * every job's deliveries). Each range holds its prefix under any collation (`bat_…` sorts
 * from `bat_` to before `bau` whether `_` is ignored or not); `substr` drops what else a
 * collation puts inside it (`batch…` under en_US).
 */
const BATCH_OWNER = sql`job_id >= 'bat_' AND job_id < 'bau' AND substr(job_id, 1, 4) = 'bat_'`;
const MONTH_OWNER = sql`job_id >= 'usage_' AND job_id < 'usagf'
  AND substr(job_id, 1, 6) = 'usage_'`;

/**
 * Webhook records that no job row holds: a `batch.completed` delivery stands under its
 * batch's id and a `usage.threshold` one under the month's (`usage_…`), so deleting a job's
 * rows (retention-jobs.ts deleteJobs) never reaches them. They go at the same cutoff, counted
 * from their last attempt, once settled: a pending one is still being retried. A month's are
 * kept until the month is over: their key is what makes each threshold go out once a month
 * (usage/thresholds.ts), and a later check would send it again.
 *
 * No blobs, so no lease: one bounded read of ids, then the attempts and the deliveries, each
 * statement alone (D1 has no transactions; a pass cut between them leaves deliveries that the
 * next pass finds again).
 */
export async function deleteLooseDeliveries(
  db: Kysely<Database>,
  scope: RetentionScope,
  cutoffs: { settledBefore: number; monthStart: number },
  limit: number,
): Promise<{ deleted: number; endpoints: EndpointKey[] }> {
  const due = await sql<{ id: string } & EndpointKey>`
    SELECT id, tenant_id, url FROM webhook_deliveries
    WHERE ${scopeCondition(scope, "tenant_id")}
      AND ((${BATCH_OWNER}) OR (${MONTH_OWNER} AND created_at < ${cutoffs.monthStart}))
      AND state <> 'pending' AND updated_at < ${cutoffs.settledBefore}
    ORDER BY updated_at ${limitClause(limit)}`.execute(db);
  let deleted = 0;
  for (const part of chunked(due.rows.map((row) => row.id))) {
    await db.deleteFrom("webhook_attempts").where("delivery_id", "in", part).execute();
    const result = await db
      .deleteFrom("webhook_deliveries")
      .where("id", "in", part)
      .where("state", "<>", "pending")
      .executeTakeFirst();
    deleted += Number(result.numDeletedRows);
  }
  return { deleted, endpoints: due.rows.map(({ tenant_id, url }) => ({ tenant_id, url })) };
}

/** A tenant's webhook URL: a `webhook_endpoints` row's key. */
export interface EndpointKey {
  tenant_id: string;
  url: string;
}

/** The endpoints these jobs' deliveries went to: read before the jobs' rows are deleted. */
export async function endpointsOfJobs(
  db: Kysely<Database>,
  jobIds: readonly string[],
): Promise<EndpointKey[]> {
  const keys: EndpointKey[] = [];
  for (const part of chunked(jobIds)) {
    keys.push(
      ...(await db
        .selectFrom("webhook_deliveries")
        .select(["tenant_id", "url"])
        .distinct()
        .where("job_id", "in", part)
        .execute()),
    );
  }
  return keys;
}

/**
 * Forgets the endpoints among `keys` that nothing was sent to since `idleBefore` (a row is
 * updated by every attempt), once their deliveries are deleted: else every URL a tenant ever
 * used (per-job URLs are common) stayed listed by `GET /v1/webhooks/endpoints` and got each
 * `usage.threshold` webhook, for ever. A disabled one stays until it is enabled again: without
 * its row the next delivery would go to a receiver that is gone. Only the deleted deliveries'
 * URLs are looked at, each by its key, so this never scans the table.
 */
export async function pruneEndpoints(
  db: Kysely<Database>,
  keys: readonly EndpointKey[],
  idleBefore: number,
): Promise<number> {
  const byTenant = new Map<string, Set<string>>();
  for (const { tenant_id, url } of keys) {
    byTenant.set(tenant_id, (byTenant.get(tenant_id) ?? new Set()).add(url));
  }
  let pruned = 0;
  for (const [tenantId, urls] of byTenant) {
    for (const part of chunked([...urls])) {
      const result = await db
        .deleteFrom("webhook_endpoints")
        .where("tenant_id", "=", tenantId)
        .where("url", "in", part)
        .where("updated_at", "<", idleBefore)
        .where("disabled_at", "is", null)
        .executeTakeFirst();
      pruned += Number(result.numDeletedRows);
    }
  }
  return pruned;
}
