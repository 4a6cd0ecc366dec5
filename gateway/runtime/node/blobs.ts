import { createDiskBlobStore } from "../../../shared/blob/disk.ts";
import type { BlobRouteDeps } from "../../../shared/blob/local-backend.ts";
import type { BlobStore } from "../../../shared/blob/port.ts";
import type { S3BlobStoreOptions } from "../../../shared/blob/s3.ts";
import { describeS3 } from "../../../shared/blob/s3-settings.ts";
import { ConfigurationError } from "../../../shared/errors.ts";
import { answeringOutages } from "../../blob-outage.ts";
import type { Log } from "../../context.ts";
import type { NodeGatewayOptions } from "./types.ts";

export interface NodeBlobs {
  store: BlobStore;
  /** The disk store behind the gateway's own `/v1/blobs` routes; absent with S3. */
  local?: BlobRouteDeps;
  /** For the banner: `on disk in <dir>` or `in s3://bucket/prefix`. */
  description: string;
}

/**
 * The Node gateway's blobs: S3 when GANTRY_S3_BUCKET is set, so that every gateway on one
 * database reads what another was sent (a disk is one gateway's only: an upload PUT to one
 * was a 409 upload_incomplete, or a 404 for the agent, through the next); else the data
 * directory, behind URLs this gateway signs and serves itself.
 */
export async function nodeBlobs(
  options: Pick<NodeGatewayOptions, "s3" | "blobDir" | "blobSecret">,
  publicUrl: string,
  log: Log,
): Promise<NodeBlobs> {
  if (options.s3) {
    // Loaded only for S3: the AWS SDK costs a gateway on disk ~150 ms and 24 MB at start.
    const { createS3BlobStore } = await import("../../../shared/blob/s3.ts");
    const store = answeringOutages(createS3BlobStore(options.s3), log);
    return { store, description: `in ${describeS3(options.s3)}` };
  }
  const disk = createDiskBlobStore({
    root: options.blobDir,
    publicBaseUrl: publicUrl,
    secret: options.blobSecret,
  });
  return {
    store: disk,
    local: { backend: disk, secret: options.blobSecret },
    description: `on disk in ${options.blobDir}`,
  };
}

/**
 * What a gateway on Postgres with blobs on its disk says at start: valid alone, but every
 * other gateway on the database refuses what was uploaded through this one.
 */
export const DISK_BLOBS_ON_POSTGRES =
  "blobs are on this gateway's disk only: gateways sharing this Postgres database need one bucket (GANTRY_S3_BUCKET), or a file uploaded through one is refused by the others (409 upload_incomplete)";

/**
 * Warns once, when the shared limiter's rounds first see other gateways on the database
 * while this one keeps blobs on its disk (a replica missing its GANTRY_S3_* settings, say):
 * uploads across them then break with no other word.
 */
export function warnOfSharedDiskBlobs(log: Log): (count: number) => void {
  let warned = false;
  return (count) => {
    if (warned || count < 2) return;
    warned = true;
    log.warn(
      { gateways: count, setting: "GANTRY_S3_BUCKET" },
      `${count} gateways share this database and this one keeps blobs on its disk: a file uploaded through one is refused by the others (409 upload_incomplete); give every gateway the same GANTRY_S3_BUCKET`,
    );
  };
}

/**
 * Resolves the credentials the AWS SDK's default chain finds for the bucket, once at start:
 * the chain is only asked at the first presign otherwise, so a gateway that found none
 * served, and answered every upload and artifact 500. None found is one line, exit 2.
 */
export async function checkS3Credentials(options: S3BlobStoreOptions): Promise<void> {
  const { S3Client } = await import("@aws-sdk/client-s3");
  const client = new S3Client({
    region: options.region,
    ...(options.credentials !== undefined && { credentials: options.credentials }),
  });
  try {
    await client.config.credentials();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigurationError(
      "GANTRY_S3_BUCKET",
      `no AWS credentials for the S3 bucket (GANTRY_S3_BUCKET): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or give the host a role (${reason})`,
    );
  } finally {
    client.destroy();
  }
}
