import { type Kysely, type RawBuilder, sql } from "kysely";
import { limitClause } from "../../shared/db/inline-limits.ts";
import type { Database } from "../../shared/db/schema.ts";
import { boundList } from "./bound-list.ts";
import {
  chunked,
  free,
  isPostgres,
  SETS_RETENTION,
  scopeCondition,
  TERMINAL,
} from "./retention-jobs.ts";
import type { PurgeLease, RetentionScope } from "./retention-leases.ts";
import type { TenantRow } from "./tenants.ts";
import type { UploadRow } from "./uploads.ts";

/**
 * Retention's upload statements. A claimed upload carries `purge_token` from then on, and
 * `uploadForTenant` no longer finds it: no new job can name an upload on its way out.
 */

/** No queued or running job of the upload's tenant names it in its input. */
const unnamedByActiveJobs = (tenant: RawBuilder<unknown>, id: RawBuilder<unknown>) => sql`
  NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.tenant_id = ${tenant}
    AND jobs.status NOT IN ${TERMINAL}
    AND jobs.input LIKE '%"' || ${id} || '"%')`;

export async function claimUploads(
  db: Kysely<Database>,
  scope: RetentionScope,
  madeBefore: number,
  lease: PurgeLease,
  limit: number,
  unusedOnly: boolean,
): Promise<UploadRow[]> {
  const lock = isPostgres(db) ? sql` FOR UPDATE SKIP LOCKED` : sql``;
  // Never used, or any upload at all (a tenant purge); either way none a waiting or running
  // job names, whether or not its submit got as far as marking it used.
  const unnamed = unnamedByActiveJobs(sql.ref("uploads.tenant_id"), sql.ref("uploads.id"));
  const which = unusedOnly ? sql`used_at IS NULL AND ${unnamed}` : unnamed;
  const result = await sql<UploadRow>`
    UPDATE uploads SET purge_token = ${lease.token}, purge_until = ${lease.until}
    WHERE id IN (
      SELECT id FROM uploads
      WHERE ${which} AND created_at < ${madeBefore}
        AND ${scopeCondition(scope, "tenant_id")} AND ${free(lease.now)}
      ORDER BY created_at ${limitClause(limit)}${lock})
    AND ${free(lease.now)} AND ${which}
    RETURNING *`.execute(db);
  return result.rows;
}

export async function claimUpload(
  db: Kysely<Database>,
  tenantId: string,
  uploadId: string,
  lease: PurgeLease,
): Promise<UploadRow | null> {
  const result = await sql<UploadRow>`
    UPDATE uploads SET purge_token = ${lease.token}, purge_until = ${lease.until}
    WHERE id = ${uploadId} AND tenant_id = ${tenantId} AND ${free(lease.now)}
      AND ${unnamedByActiveJobs(sql.ref("uploads.tenant_id"), sql.ref("uploads.id"))}
    RETURNING *`.execute(db);
  return result.rows[0] ?? null;
}

export async function deleteUploads(
  db: Kysely<Database>,
  ids: readonly string[],
  token: string,
): Promise<string[]> {
  const deleted: string[] = [];
  for (const part of chunked(ids)) {
    const rows = await db
      .deleteFrom("uploads")
      .where("id", "in", part)
      .where("purge_token", "=", token)
      .returning("id")
      .execute();
    deleted.push(...rows.map((row) => row.id));
  }
  return deleted;
}

export async function releaseUploads(
  db: Kysely<Database>,
  ids: readonly string[],
  token: string,
  retryAt: number,
): Promise<void> {
  // The token stays: a claimed upload is condemned (no new job may name it); only the
  // lease ends, so a later sweep takes the deletion up again from `retryAt` on.
  for (const part of chunked(ids)) {
    await db
      .updateTable("uploads")
      .set((eb) => ({ purge_until: retryAt, purge_failures: eb("purge_failures", "+", 1) }))
      .where("id", "in", part)
      .where("purge_token", "=", token)
      .execute();
  }
}

export function overriddenTenants(
  db: Kysely<Database>,
  limit: number,
  after?: string,
): Promise<TenantRow[]> {
  let query = db
    .selectFrom("tenants")
    .selectAll()
    .where(sql<boolean>`${SETS_RETENTION}`)
    .orderBy("id")
    .limit(limit);
  if (after !== undefined) query = query.where("id", ">", after);
  return query.execute();
}

/** Marks the uploads among `ids` named by a job (first time only): one statement. */
export async function markUploadsUsed(db: Kysely<Database>, ids: readonly string[], now: number) {
  if (ids.length === 0) return;
  await db
    .updateTable("uploads")
    .set({ used_at: now })
    .where(sql<boolean>`id ${boundList(db, ids)}`)
    .where("used_at", "is", null)
    .where("purge_token", "is", null)
    .execute();
}
