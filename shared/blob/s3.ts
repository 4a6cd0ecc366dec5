import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from "@aws-sdk/client-s3";
import { getSignedUrl } from "@aws-sdk/s3-request-presigner";
import { assertSafeBlobKey } from "./local-backend.ts";
import type { BlobHead, BlobStore, PresignedRequest, PresignPutOptions } from "./port.ts";

/**
 * The `s3` BlobStore: AWS S3, Cloudflare R2 or MinIO (through `endpoint`). Clients and
 * agents get SigV4 presigned URLs and talk to the bucket directly; only the gateway holds
 * credentials. Runs on Node and Workers: it imports no `node:*` module.
 *
 * An upload URL signs `content-type` and, for a known size, `content-length`, so S3
 * refuses a body of another type or length (SignatureDoesNotMatch). A presigned PUT cannot
 * bound a size it does not know: for outputs presigned with `maxBytes` only, the URL
 * binds the type, and whoever trusts the size must `head` the object after the upload
 * (and delete it when too large). A presigned POST policy with `content-length-range`
 * would enforce the bound in S3, but it needs a multipart form (not the PUT that the
 * port's `PresignedRequest` describes) and `@aws-sdk/s3-presigned-post`, which is not a
 * dependency.
 */
export interface S3BlobStoreOptions {
  bucket: string;
  /** The bucket's region; `auto` for R2. */
  region: string;
  /** R2 (`https://<account>.r2.cloudflarestorage.com`), MinIO or an emulator; AWS when omitted. */
  endpoint?: string;
  /** `<endpoint>/<bucket>/<key>` URLs instead of `<bucket>.<endpoint>/<key>` (MinIO, emulators). */
  forcePathStyle?: boolean;
  /** Static credentials; the SDK's default chain (env, role, ...) when omitted. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Put in front of every key, e.g. `gantry/`, so deployments can share a bucket. */
  keyPrefix?: string;
  /** Lifetime of presigned URLs when the caller gives none; 15 minutes by default. */
  defaultExpiresInSeconds?: number;
  /** Clock in milliseconds for signing, injectable so tests can mint expired URLs. */
  now?: () => number;
}

const DEFAULT_EXPIRES_IN_SECONDS = 15 * 60;
// SigV4's ceiling for presigned URLs.
const MAX_EXPIRES_IN_SECONDS = 7 * 24 * 60 * 60;
// The largest object a single PUT may create.
const MAX_PUT_BYTES = 5 * 1024 ** 3;

export function createS3BlobStore(options: S3BlobStoreOptions): BlobStore {
  const { bucket } = options;
  const keyPrefix = options.keyPrefix ?? "";
  const now = options.now ?? Date.now;
  const defaultExpires = checkExpiresIn(
    options.defaultExpiresInSeconds ?? DEFAULT_EXPIRES_IN_SECONDS,
  );
  const client = new S3Client({
    region: options.region,
    ...(options.endpoint !== undefined && { endpoint: options.endpoint }),
    ...(options.forcePathStyle !== undefined && { forcePathStyle: options.forcePathStyle }),
    ...(options.credentials !== undefined && { credentials: options.credentials }),
    // Since SDK 3.729 every PutObject carries a CRC32 checksum by default; in a presigned
    // URL that is the checksum of the empty body at signing time, so every real upload
    // would fail it (and some S3-compatible stores do not know the parameter). Checksums
    // only where an operation requires one.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });

  const objectKey = (key: string) => {
    assertSafeBlobKey(key);
    return `${keyPrefix}${key}`;
  };

  /** Signs as of `now()`; S3 counts the expiry from the signing second. */
  const signingWindow = (expiresInSeconds: number | undefined) => {
    const seconds =
      expiresInSeconds === undefined ? defaultExpires : checkExpiresIn(expiresInSeconds);
    const signingDate = new Date(Math.floor(now() / 1000) * 1000);
    return { seconds, signingDate, expiresAt: new Date(signingDate.getTime() + seconds * 1000) };
  };

  return {
    async presignPut(key: string, put: PresignPutOptions): Promise<PresignedRequest> {
      const Key = objectKey(key);
      const size = exactSize(put);
      const { seconds, signingDate, expiresAt } = signingWindow(put.expiresInSeconds);
      const headers: Record<string, string> = { "content-type": put.contentType };
      if (size !== undefined) headers["content-length"] = String(size);
      // The presigner leaves content-type unsigned by default; listing both headers as
      // signable puts them in SignedHeaders, and unhoistable keeps them out of the query.
      const signed = new Set(Object.keys(headers));
      const command = new PutObjectCommand({
        Bucket: bucket,
        Key,
        ContentType: put.contentType,
        ...(size !== undefined && { ContentLength: size }),
      });
      const url = await getSignedUrl(client, command, {
        expiresIn: seconds,
        signingDate,
        signableHeaders: signed,
        unhoistableHeaders: new Set(signed),
      });
      return { url, method: "PUT", headers, expiresAt };
    },

    async presignGet(key: string, get?: { expiresInSeconds?: number }): Promise<string> {
      const Key = objectKey(key);
      const { seconds, signingDate } = signingWindow(get?.expiresInSeconds);
      const command = new GetObjectCommand({ Bucket: bucket, Key });
      return getSignedUrl(client, command, { expiresIn: seconds, signingDate });
    },

    async head(key: string): Promise<BlobHead | null> {
      try {
        const head = await client.send(
          new HeadObjectCommand({ Bucket: bucket, Key: objectKey(key) }),
        );
        return { sizeBytes: head.ContentLength ?? 0, contentType: head.ContentType ?? null };
      } catch (error) {
        // HEAD has no body, so S3 can only say 404 (the SDK names it NotFound).
        if (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404) {
          return null;
        }
        throw error;
      }
    },

    async delete(key: string): Promise<void> {
      // Deleting a missing key succeeds in S3, as the port expects.
      await client.send(new DeleteObjectCommand({ Bucket: bucket, Key: objectKey(key) }));
    },
  };
}

/** The exact size to sign, or undefined when only `maxBytes` bounds the upload. */
function exactSize(put: PresignPutOptions): number | undefined {
  const { sizeBytes, maxBytes } = put;
  if (sizeBytes === undefined) {
    if (maxBytes === undefined) throw new Error("presignPut needs sizeBytes or maxBytes");
    return undefined;
  }
  if (!Number.isInteger(sizeBytes) || sizeBytes < 0 || sizeBytes > MAX_PUT_BYTES) {
    throw new Error(
      `sizeBytes must be a whole number from 0 to ${MAX_PUT_BYTES}, got ${sizeBytes}`,
    );
  }
  if (maxBytes !== undefined && sizeBytes > maxBytes) {
    throw new Error(`sizeBytes ${sizeBytes} is above maxBytes ${maxBytes}`);
  }
  return sizeBytes;
}

function checkExpiresIn(seconds: number): number {
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_EXPIRES_IN_SECONDS) {
    throw new Error(
      `expiresInSeconds must be a whole number from 1 to ${MAX_EXPIRES_IN_SECONDS}, got ${seconds}`,
    );
  }
  return seconds;
}
