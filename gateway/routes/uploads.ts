import { Hono } from "hono";
import { HttpProblem } from "../../shared/errors.ts";
import { newId } from "../../shared/ids.ts";
import { type Upload, UploadRequest } from "../../shared/protocol/index.ts";
import type { AppEnv } from "../env.ts";
import { IMAGE_TYPES } from "../models.ts";
import { insertUpload, uploadBlobKey } from "../store/uploads.ts";
import { parseJsonBody } from "../validation.ts";

export const uploadRoutes = new Hono<AppEnv>().post("/", async (c) => {
  const gateway = c.var.gateway;
  const request = await parseJsonBody(c, UploadRequest);
  const accepted: readonly string[] = IMAGE_TYPES;
  if (!accepted.includes(request.content_type)) {
    throw new HttpProblem(
      415,
      "unsupported_content_type",
      "Unsupported content type",
      `content_type must be one of ${accepted.join(", ")}.`,
    );
  }
  if (request.size_bytes > gateway.config.maxUploadBytes) {
    throw new HttpProblem(
      413,
      "upload_too_large",
      "Upload too large",
      `size_bytes may be at most ${gateway.config.maxUploadBytes}.`,
    );
  }
  const now = gateway.now();
  const id = newId("upl", now);
  const presigned = await gateway.blobs.presignPut(uploadBlobKey(id), {
    contentType: request.content_type,
    sizeBytes: request.size_bytes,
    expiresInSeconds: gateway.config.uploadExpiresSeconds,
  });
  await insertUpload(gateway.db, {
    id,
    tenant_id: c.var.tenant.id,
    content_type: request.content_type,
    size_bytes: request.size_bytes,
    blob_key: uploadBlobKey(id),
    created_at: now,
    expires_at: presigned.expiresAt.getTime(),
  });
  const upload: Upload = {
    id,
    object: "upload",
    url: presigned.url,
    method: "PUT",
    headers: presigned.headers,
    expires_at: presigned.expiresAt.toISOString(),
  };
  return c.json(upload, 201);
});
