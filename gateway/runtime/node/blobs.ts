import { createDiskBlobStore } from "../../../shared/blob/disk.ts";
import type { BlobRouteDeps } from "../../../shared/blob/local-backend.ts";
import type { BlobStore } from "../../../shared/blob/port.ts";
import { createS3BlobStore } from "../../../shared/blob/s3.ts";
import { describeS3 } from "../../../shared/blob/s3-settings.ts";
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
export function nodeBlobs(
  options: Pick<NodeGatewayOptions, "s3" | "blobDir" | "blobSecret">,
  publicUrl: string,
): NodeBlobs {
  if (options.s3) {
    return { store: createS3BlobStore(options.s3), description: `in ${describeS3(options.s3)}` };
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
