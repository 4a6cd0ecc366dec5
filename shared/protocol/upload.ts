import { z } from "zod";

export const ContentType = z
  .string()
  .max(100)
  .regex(/^[a-z]+\/[a-z0-9.+-]+$/, "a MIME type such as image/png");

export const UploadRequest = z.strictObject({
  content_type: ContentType,
  size_bytes: z.number().int().positive(),
});
export type UploadRequest = z.infer<typeof UploadRequest>;

/** A presigned upload: send `method` to `url` with exactly these `headers` and body size. */
export const Upload = z.object({
  id: z.string(),
  object: z.literal("upload"),
  url: z.url(),
  method: z.literal("PUT"),
  headers: z.record(z.string(), z.string()),
  expires_at: z.iso.datetime(),
});
export type Upload = z.infer<typeof Upload>;

/** `GET /v1/uploads/{id}`: whether the file has arrived at its presigned URL yet. */
export const UploadStatus = z.object({
  id: z.string(),
  object: z.literal("upload"),
  content_type: z.string(),
  size_bytes: z.number().int(),
  status: z.enum(["pending", "received"]),
  created_at: z.iso.datetime(),
  expires_at: z.iso.datetime().describe("When the upload URL stops accepting the file."),
});
export type UploadStatus = z.infer<typeof UploadStatus>;
