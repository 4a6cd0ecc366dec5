import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Kysely } from "kysely";
import type { Stores } from "../../../gateway/store/kysely-stores.ts";
import { artifactBlobKey, uploadBlobKey } from "../../../gateway/store/uploads.ts";
import { createDiskBlobStore } from "../../../shared/blob/disk.ts";
import type { LocalBlobBackend } from "../../../shared/blob/local-backend.ts";
import type { BlobStore } from "../../../shared/blob/port.ts";
import type { Database } from "../../../shared/db/schema.ts";
import { newId, randomToken } from "../../../shared/ids.ts";

export interface RetentionBackend {
  db: Kysely<Database>;
  stores: Stores;
  cleanup(): Promise<void>;
}

/** The blob store the sweeper deletes through, and how the suite stores and checks blobs. */
export interface RetentionBlobs {
  store: Pick<BlobStore, "delete" | "head">;
  put(key: string, bytes: number): Promise<void>;
  /**
   * A delete of `key` as this store fails when it cannot be reached (S3: the SDK's own
   * error, after its retries, from an endpoint nothing listens on); it must reject.
   */
  unreachable?: (key: string) => Promise<void>;
  cleanup(): Promise<void>;
}

/** `put` through a store's own write (disk, R2): `bytes` zero bytes as a PNG. */
export function writeZeros(store: LocalBlobBackend): RetentionBlobs["put"] {
  return async (key, bytes) => {
    const body = new Blob([new Uint8Array(bytes)]).stream();
    await store.write(key, body, { contentType: "image/png", maxBytes: bytes, sizeBytes: bytes });
  };
}

/** Blobs on disk (the Node gateway's default store) in a folder of their own. */
export async function diskBlobs(): Promise<RetentionBlobs> {
  const root = mkdtempSync(join(tmpdir(), "gantry-retention-"));
  const disk = createDiskBlobStore({
    root,
    publicBaseUrl: "http://127.0.0.1:1",
    secret: randomToken(32),
  });
  return {
    store: disk,
    put: writeZeros(disk),
    cleanup: async () => rmSync(root, { recursive: true, force: true }),
  };
}

export const T0 = 1_760_000_000_000;
export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;

/** What `endedJob` stores as a job's output by default: text and one artifact, `image`. */
export const ARTIFACT_OUTPUT = (bytes: number) => ({
  text: "secret",
  image: { content_type: "image/png", size_bytes: bytes },
});

/** The rows and blobs the retention suite makes: tenants, uploads, ended jobs. */
export function retentionFixtures(
  current: () => { backend: RetentionBackend; blobs: RetentionBlobs },
) {
  const putBlob = (key: string, bytes: number) => current().blobs.put(key, bytes);
  const stored = async (key: string) => (await current().blobs.store.head(key)) !== null;

  const tenant = async (plan: "free" | "pro", overrides: Record<string, number> | null = null) => {
    const id = `ten_${randomToken(6)
      .toLowerCase()
      .replace(/[^a-z0-9]/g, "x")}`;
    await current().backend.stores.tenants.insert({
      id,
      name: id,
      plan,
      overrides,
      webhookSecret: randomToken(16),
      now: T0,
    });
    return id;
  };

  const upload = async (tenantId: string, at: number, bytes = 100) => {
    const id = newId("upl", at);
    await current().backend.stores.uploads.insert({
      id,
      tenant_id: tenantId,
      content_type: "image/png",
      size_bytes: bytes,
      blob_key: uploadBlobKey(id),
      created_at: at,
      expires_at: at + HOUR,
    });
    await putBlob(uploadBlobKey(id), bytes);
    return id;
  };

  /**
   * A job that ended at `endedAt` with an artifact `image` of `bytes` bytes stored; or, with
   * `output`, one that succeeded with that output as its model returned it (nothing stored).
   */
  const endedJob = async (
    tenantId: string,
    endedAt: number,
    options: {
      image?: string;
      bytes?: number;
      status?: string;
      output?: Record<string, unknown>;
    } = {},
  ) => {
    const id = newId("job", endedAt);
    const row = await current().backend.stores.jobs.insert({
      id,
      tenantId,
      model: "noop",
      priority: 1,
      input: options.image ? { image: options.image } : {},
      webhook: null,
      idempotencyKey: null,
      requestHash: null,
      traceparent: null,
      now: endedAt - 1000,
      expiresAt: endedAt + DAY,
    });
    if (!row) throw new Error("insert refused");
    if (options.status === "queued") {
      if (options.image)
        await current().backend.stores.retention.markUploadUsed(options.image, endedAt);
      return id;
    }
    const bytes = options.bytes ?? 10;
    const output = options.output ?? ARTIFACT_OUTPUT(bytes);
    if (!options.output) await putBlob(artifactBlobKey(id, "image"), bytes);
    await current()
      .backend.db.updateTable("jobs")
      .set({ status: "succeeded", output: JSON.stringify(output), finished_at: endedAt })
      .where("id", "=", id)
      .execute();
    return id;
  };
  return { putBlob, stored, tenant, upload, endedJob };
}
