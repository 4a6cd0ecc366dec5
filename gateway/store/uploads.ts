import type { Kysely, Selectable } from "kysely";
import type { Database, UploadTable } from "../../shared/db/schema.ts";

export type UploadRow = Selectable<UploadTable>;
/** What a new upload is made with; retention fills the rest (migration 0013). */
export type NewUpload = Omit<
  UploadRow,
  "used_at" | "purge_token" | "purge_until" | "purge_failures"
>;

export const uploadBlobKey = (uploadId: string) => `inputs/${uploadId}`;
/** Only for names `isArtifactName` accepts (gateway/jobs/artifacts.ts): they need no escaping. */
export const artifactBlobKey = (jobId: string, name: string) => `outputs/${jobId}/${name}`;

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
