import { type Kysely, type Selectable, sql } from "kysely";
import type { Database, UploadTable } from "../../shared/db/schema.ts";
import { boundList } from "./bound-list.ts";

export type UploadRow = Selectable<UploadTable>;
/** What a new upload is made with; retention fills the rest (migration 0013). */
export type NewUpload = Omit<
  UploadRow,
  "used_at" | "purge_token" | "purge_until" | "purge_failures"
>;

export const uploadBlobKey = (uploadId: string) => `inputs/${uploadId}`;
/** Only for names `isArtifactName` accepts (gateway/jobs/artifacts.ts): they need no escaping. */
export const artifactBlobKey = (jobId: string, name: string) => `outputs/${jobId}/${name}`;

/** A tenant's uploads among `ids` (none claimed by retention), by id: one statement. */
export async function uploadsForTenant(
  db: Kysely<Database>,
  tenantId: string,
  ids: readonly string[],
): Promise<Map<string, UploadRow>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom("uploads")
    .selectAll()
    .where(sql<boolean>`id ${boundList(db, ids)}`)
    .where("tenant_id", "=", tenantId)
    .where("purge_token", "is", null)
    .execute();
  return new Map(rows.map((row) => [row.id, row]));
}

export async function insertUpload(db: Kysely<Database>, upload: NewUpload): Promise<void> {
  await db.insertInto("uploads").values(upload).execute();
}

export function uploadForTenant(
  db: Kysely<Database>,
  tenantId: string,
  id: string,
): Promise<UploadRow | undefined> {
  return (
    db
      .selectFrom("uploads")
      .selectAll()
      .where("id", "=", id)
      .where("tenant_id", "=", tenantId)
      // Claimed by retention (retention-uploads.ts): on its way out, not to be named again.
      .where("purge_token", "is", null)
      .executeTakeFirst()
  );
}
