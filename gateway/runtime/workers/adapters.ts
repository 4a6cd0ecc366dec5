/**
 * The Workers gateway's adapters, chosen from its settings (settings.ts):
 * - queue: `GANTRY_QUEUE_URL=sqs://…` selects SQS; unset keeps the `sql` queue on D1.
 * - blobs: `GANTRY_S3_BUCKET` (with `GANTRY_S3_REGION`, and optionally `GANTRY_S3_ENDPOINT`,
 *   `GANTRY_S3_FORCE_PATH_STYLE`, `GANTRY_S3_KEY_PREFIX`) selects S3 and presigned S3 URLs;
 *   unset keeps R2 (`BLOBS`) behind the gateway's own signed `/v1/blobs` URLs.
 * S3 and SQS share the `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` secrets: Workers have
 * no instance role or credentials file for the SDK to find. A combination that cannot work
 * throws a ConfigurationError naming the setting to fix.
 */
import type { R2BucketLike } from "../../../shared/blob/r2.ts";
import type { S3BlobStoreOptions } from "../../../shared/blob/s3.ts";
import { ConfigurationError } from "../../../shared/errors.ts";
import type { SqsQueueUrlParts } from "../../../shared/queue/sqs/url.ts";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export type QueueChoice =
  | { kind: "sql" }
  | { kind: "sqs"; url: SqsQueueUrlParts; credentials: AwsCredentials };

export type BlobChoice =
  | { kind: "r2"; bucket: R2BucketLike; secret: string }
  | { kind: "s3"; options: S3BlobStoreOptions };

/** The settings the choice reads, as the table parsed them (unset: undefined). */
interface AdapterSettings {
  queue?: SqsQueueUrlParts | undefined;
  blobSecret?: string | undefined;
  s3Bucket?: string | undefined;
  s3Region?: string | undefined;
  s3Endpoint?: string | undefined;
  s3ForcePathStyle?: boolean | undefined;
  s3KeyPrefix?: string | undefined;
  awsAccessKeyId?: string | undefined;
  awsSecretAccessKey?: string | undefined;
}

/** Settings that only mean something with GANTRY_S3_BUCKET. */
const S3_ONLY = [
  ["s3Region", "GANTRY_S3_REGION"],
  ["s3Endpoint", "GANTRY_S3_ENDPOINT"],
  ["s3ForcePathStyle", "GANTRY_S3_FORCE_PATH_STYLE"],
  ["s3KeyPrefix", "GANTRY_S3_KEY_PREFIX"],
] as const;

export function chooseQueue(settings: AdapterSettings): QueueChoice {
  if (settings.queue === undefined) return { kind: "sql" };
  return {
    kind: "sqs",
    url: settings.queue,
    credentials: awsCredentials(settings, "the SQS queue"),
  };
}

export function chooseBlobs(settings: AdapterSettings, r2: R2BucketLike | undefined): BlobChoice {
  const bucket = settings.s3Bucket;
  if (bucket === undefined) {
    const stray = S3_ONLY.find(([key]) => settings[key] !== undefined)?.[1];
    if (stray) {
      throw new ConfigurationError(
        "GANTRY_S3_BUCKET",
        `${stray} is set but GANTRY_S3_BUCKET is not: set the bucket to keep blobs in S3, or unset ${stray} to keep them in R2.`,
      );
    }
    if (!r2) {
      throw new ConfigurationError(
        "BLOBS",
        'No blob store: add the R2 binding "BLOBS" to wrangler.toml, or set GANTRY_S3_BUCKET and GANTRY_S3_REGION for S3.',
      );
    }
    if (settings.blobSecret === undefined) {
      throw new ConfigurationError(
        "GANTRY_BLOB_SECRET",
        "GANTRY_BLOB_SECRET is not set: run `wrangler secret put GANTRY_BLOB_SECRET`.",
      );
    }
    return { kind: "r2", bucket: r2, secret: settings.blobSecret };
  }
  if (settings.s3Region === undefined) {
    throw new ConfigurationError(
      "GANTRY_S3_REGION",
      "GANTRY_S3_REGION is not set: the bucket's region, such as eu-west-1 (auto for R2).",
    );
  }
  const options: S3BlobStoreOptions = {
    bucket,
    region: settings.s3Region,
    forcePathStyle: settings.s3ForcePathStyle ?? false,
    credentials: awsCredentials(settings, "the S3 bucket"),
  };
  if (settings.s3Endpoint !== undefined) options.endpoint = settings.s3Endpoint;
  if (settings.s3KeyPrefix !== undefined) options.keyPrefix = settings.s3KeyPrefix;
  return { kind: "s3", options };
}

function awsCredentials(settings: AdapterSettings, forWhat: string): AwsCredentials {
  const { awsAccessKeyId, awsSecretAccessKey } = settings;
  for (const [name, value] of [
    ["AWS_ACCESS_KEY_ID", awsAccessKeyId],
    ["AWS_SECRET_ACCESS_KEY", awsSecretAccessKey],
  ] as const) {
    if (value === undefined) {
      throw new ConfigurationError(
        name,
        `${name} is not set: ${forWhat} needs it (Workers have no other AWS credentials); run \`wrangler secret put ${name}\`.`,
      );
    }
  }
  return { accessKeyId: awsAccessKeyId ?? "", secretAccessKey: awsSecretAccessKey ?? "" };
}
