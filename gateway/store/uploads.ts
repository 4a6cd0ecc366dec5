import type { Kysely, Selectable } from "kysely";
import type { Database, UploadTable } from "../../shared/db/schema.ts";

export type UploadRow = Selectable<UploadTable>;

export const uploadBlobKey = (uploadId: string) => `inputs/${uploadId}`;
/** Artifact names are spec names (letters, digits, `_`), so the key needs no escaping. */
export const artifactBlobKey = (jobId: string, name: string) => `outputs/${jobId}/${name}`;

export async function insertUpload(db: Kysely<Database>, upload: UploadRow): Promise<void> {
  await db.insertInto("uploads").values(upload).execute();
}

export function uploadForTenant(
  db: Kysely<Database>,
  tenantId: string,
  id: string,
): Promise<UploadRow | undefined> {
  return db
    .selectFrom("uploads")
    .selectAll()
    .where("id", "=", id)
    .where("tenant_id", "=", tenantId)
    .executeTakeFirst();
}
