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
import { type S3Settings, s3BlobOptions } from "../../../shared/blob/s3-settings.ts";
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
interface AdapterSettings extends S3Settings {
  queue?: SqsQueueUrlParts | undefined;
  blobSecret?: string | undefined;
  awsAccessKeyId?: string | undefined;
  awsSecretAccessKey?: string | undefined;
}

export function chooseQueue(settings: AdapterSettings): QueueChoice {
  if (settings.queue === undefined) return { kind: "sql" };
  return {
    kind: "sqs",
    url: settings.queue,
    credentials: awsCredentials(settings, "the SQS queue"),
  };
}

export function chooseBlobs(settings: AdapterSettings, r2: R2BucketLike | undefined): BlobChoice {
  const s3 = s3BlobOptions(settings, "R2");
  // Workers have no instance role or credentials file: the secrets are the only credentials.
  if (s3)
    return {
      kind: "s3",
      options: { ...s3, credentials: awsCredentials(settings, "the S3 bucket") },
    };
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
