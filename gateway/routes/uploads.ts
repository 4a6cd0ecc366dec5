import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { HttpProblem, notFound } from "../../shared/errors.ts";
import { newId } from "../../shared/ids.ts";
import { type Upload, UploadRequest, type UploadStatus } from "../../shared/protocol/index.ts";
import { UNDECODED_IMAGE_TYPES } from "../../shared/tasks/task.ts";
import type { AppEnv } from "../env.ts";
import { parseJsonBody } from "../http/validation.ts";
import { acceptedContentTypes } from "../models.ts";
import { documented, json, problems } from "../openapi/parts.ts";
import { uploadBlobKey } from "../store/uploads.ts";

/** The largest upload a tenant may make: its plan's ceiling, within the gateway's own. */
export function maxUploadBytes(gatewayMax: number, planMax: number): number {
  return Math.min(gatewayMax, planMax);
}

const presignRoute = createRoute({
  method: "post",
  path: "/",
  operationId: "createUpload",
  summary: "Presign an upload",
  description: "Returns a URL to PUT the file to, bound to its size and content type.",
  request: { body: { required: true, content: json("UploadRequest") } },
  responses: {
    201: { description: "Presigned upload", content: json("Upload") },
    ...problems(401, 413, 415, 422),
  },
});

const statusRoute = createRoute({
  method: "get",
  path: "/{id}",
  operationId: "getUpload",
  summary: "Whether an upload's file has arrived",
  request: { params: z.object({ id: z.string().regex(/^upl_/) }) },
  responses: {
    200: { description: "The upload", content: json("UploadStatus") },
    ...problems(401, 404),
  },
});

/**
 * Presigned uploads. Uploads name no model, so the content type is checked here against
 * every served model's allowlist, and against the job's model when a job uses the upload.
 */
export const uploadRoutes = documented(new OpenAPIHono<AppEnv>(), presignRoute, statusRoute)
  .post(presignRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const tenant = c.get("tenant");
    const request = await parseJsonBody(c, UploadRequest);
    const accepted = acceptedContentTypes(gateway.models);
    if (!accepted.includes(request.content_type)) {
      throw new HttpProblem(
        415,
        "unsupported_content_type",
        "Unsupported content type",
        `${UNDECODED_IMAGE_TYPES[request.content_type] ?? ""} content_type must be one of ${accepted.join(", ")}.`.trim(),
      );
    }
    const planMax = tenant.limits.max_upload_bytes;
    const limit = maxUploadBytes(gateway.config.maxUploadBytes, planMax);
    if (request.size_bytes > limit) {
      // Name the ceiling that binds: a plan may allow more than this gateway accepts.
      const whose =
        limit < planMax ? "on this gateway (its largest upload)" : `on your plan (${tenant.plan})`;
      throw new HttpProblem(
        413,
        "upload_too_large",
        "Upload too large",
        `size_bytes may be at most ${limit} ${whose}.`,
        { max_upload_bytes: limit },
      );
    }
    const now = gateway.now();
    const id = newId("upl", now);
    const presigned = await gateway.blobs.presignPut(uploadBlobKey(id), {
      contentType: request.content_type,
      sizeBytes: request.size_bytes,
      expiresInSeconds: gateway.config.uploadExpiresSeconds,
    });
    await gateway.stores.uploads.insert({
      id,
      tenant_id: tenant.id,
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
  })
  .get(statusRoute.getRoutingPath(), async (c) => {
    const gateway = c.get("gateway");
    const tenant = c.get("tenant");
    const id = c.req.param("id");
    // Another tenant's upload is simply not found, like its jobs.
    const upload = await gateway.stores.uploads.forTenant(tenant.id, id);
    if (!upload) throw notFound("Upload", id);
    const stored = await gateway.blobs.head(upload.blob_key);
    const status: UploadStatus["status"] =
      stored?.sizeBytes === upload.size_bytes ? "received" : "pending";
    const body: UploadStatus = {
      id: upload.id,
      object: "upload",
      content_type: upload.content_type,
      size_bytes: upload.size_bytes,
      status,
      created_at: new Date(upload.created_at).toISOString(),
      expires_at: new Date(upload.expires_at).toISOString(),
    };
    return c.json(body);
  });
