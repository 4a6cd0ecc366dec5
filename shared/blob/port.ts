/**
 * The BlobStore port. Agents and clients only ever see presigned URLs: they never hold
 * storage credentials. `disk` serves its URLs from the gateway; `s3` hands out real
 * S3/R2/MinIO URLs.
 */
export interface BlobStore {
  /** A URL that accepts exactly one PUT of `sizeBytes` bytes of `contentType`. */
  presignPut(key: string, options: PresignPutOptions): Promise<PresignedRequest>;
  /** A short-lived GET URL. */
  presignGet(key: string, options?: { expiresInSeconds?: number }): Promise<string>;
  /** Size and type of a stored object, or null when there is none. */
  head(key: string): Promise<BlobHead | null>;
  delete(key: string): Promise<void>;
}

export interface PresignPutOptions {
  contentType: string;
  /** Exact size; omitted for outputs whose size is not known in advance (bounded by maxBytes). */
  sizeBytes?: number;
  maxBytes?: number;
  expiresInSeconds?: number;
}

export interface PresignedRequest {
  url: string;
  method: "PUT";
  headers: Record<string, string>;
  expiresAt: Date;
}

export interface BlobHead {
  sizeBytes: number;
  contentType: string | null;
}
