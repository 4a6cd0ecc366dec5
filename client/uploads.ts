import type { Upload } from "../shared/protocol/index.ts";
import { type FileInput, toBlob } from "./files.ts";
import type { Transport } from "./http.ts";

export interface UploadOptions {
  /** The file's MIME type; found from the Blob, the file name or its first bytes otherwise. */
  contentType?: string;
  signal?: AbortSignal;
}

/** `uploads.create`: presigns an upload and sends the file straight to storage. */
export class Uploads {
  constructor(private readonly transport: Transport) {}

  async create(
    file: FileInput,
    options: UploadOptions = {},
  ): Promise<Upload & { size_bytes: number; content_type: string }> {
    const blob = await toBlob(file, options.contentType);
    const upload = await this.transport.json<Upload>({
      method: "POST",
      path: "/v1/uploads",
      json: { content_type: blob.type, size_bytes: blob.size },
      signal: options.signal,
    });
    // The presigned URL carries its own authorization; the bearer key must not travel to it.
    await this.transport.call({
      method: upload.method,
      path: upload.url,
      headers: upload.headers,
      body: blob,
      auth: false,
      signal: options.signal,
    });
    return { ...upload, size_bytes: blob.size, content_type: blob.type };
  }
}

/** `artifacts.download`: a binary output of a succeeded job (a mask, a cutout) as a Blob. */
export class Artifacts {
  constructor(private readonly transport: Transport) {}

  async download(
    job: string | { id: string },
    name: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<Blob> {
    const id = typeof job === "string" ? job : job.id;
    // The gateway redirects to a short-lived presigned GET; fetch follows it, and drops the
    // bearer key when the redirect leaves the gateway's origin.
    const response = await this.transport.call({
      path: `/v1/jobs/${encodeURIComponent(id)}/artifacts/${encodeURIComponent(name)}`,
      signal: options.signal,
    });
    return response.blob();
  }
}
