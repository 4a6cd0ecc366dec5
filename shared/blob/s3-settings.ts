/**
 * The S3 blob settings, one definition for both gateways: the Workers gateway's table
 * (gateway/runtime/workers/settings.ts) and the Node gateway's (cli/settings.ts) spread
 * S3_SETTINGS into theirs, and both turn what was read into the store's options with
 * `s3BlobOptions`. Set, every blob (uploads, inputs, artifacts, retention deletes) lives in
 * the bucket behind presigned S3 URLs, so gateways sharing one database share their blobs
 * too; unset, each keeps its own (R2 on Workers, the data directory on Node).
 */
import { ConfigurationError } from "../errors.ts";
import { setting } from "../settings/index.ts";
import { flag, parsed, text } from "../settings/values.ts";
import type { S3BlobStoreOptions } from "./s3.ts";

export const S3_SETTINGS = {
  s3Bucket: setting(
    "GANTRY_S3_BUCKET",
    text().optional(),
    "S3 instead of the gateway's own blob store (R2 on Workers, the data directory on Node): uploads and agent outputs go straight to the bucket through presigned URLs, `/v1/blobs` is not served, and every gateway on one database shares the blobs.",
    { shownDefault: "none (R2, binding `BLOBS`, on Workers; `<GANTRY_DATA_DIR>/blobs` on Node)" },
  ),
  s3Region: setting(
    "GANTRY_S3_REGION",
    text().optional(),
    "The bucket's region, such as eu-west-1 (`auto` for R2's S3 API); required with `GANTRY_S3_BUCKET`.",
  ),
  s3Endpoint: setting(
    "GANTRY_S3_ENDPOINT",
    parsed(endpointUrl).optional(),
    "For R2, MinIO or an emulator: the S3 API's http(s) URL.",
  ),
  s3ForcePathStyle: setting(
    "GANTRY_S3_FORCE_PATH_STYLE",
    flag().optional(),
    "`true`: path-style URLs (`<endpoint>/<bucket>/<key>`), for MinIO and emulators.",
    { shownDefault: "`false`" },
  ),
  s3KeyPrefix: setting(
    "GANTRY_S3_KEY_PREFIX",
    text()
      .refine((prefix) => !prefix.startsWith("/") && !prefix.split("/").includes(".."), {
        error: "must not start with '/' or contain '..'",
      })
      .optional(),
    "Put in front of every key, such as `gantry/`, so deployments can share a bucket.",
  ),
};

/** The S3 settings as the table parsed them (unset: undefined). */
export interface S3Settings {
  s3Bucket?: string | undefined;
  s3Region?: string | undefined;
  s3Endpoint?: string | undefined;
  s3ForcePathStyle?: boolean | undefined;
  s3KeyPrefix?: string | undefined;
}

/** Settings that only mean something with GANTRY_S3_BUCKET. */
const S3_ONLY = [
  ["s3Region", "GANTRY_S3_REGION"],
  ["s3Endpoint", "GANTRY_S3_ENDPOINT"],
  ["s3ForcePathStyle", "GANTRY_S3_FORCE_PATH_STYLE"],
  ["s3KeyPrefix", "GANTRY_S3_KEY_PREFIX"],
] as const;

/**
 * The S3 store's options, or null when GANTRY_S3_BUCKET is unset (the gateway's own store,
 * `ownStore` in the messages), without credentials: the AWS SDK's default chain finds them
 * (AWS_ACCESS_KEY_ID…, AWS_PROFILE, an instance or pod role) unless the caller adds some. A
 * combination that cannot work throws a ConfigurationError naming the setting to fix.
 */
export function s3BlobOptions(settings: S3Settings, ownStore: string): S3BlobStoreOptions | null {
  const bucket = settings.s3Bucket;
  if (bucket === undefined) {
    const stray = S3_ONLY.find(([key]) => settings[key] !== undefined)?.[1];
    if (stray) {
      throw new ConfigurationError(
        "GANTRY_S3_BUCKET",
        `${stray} is set but GANTRY_S3_BUCKET is not: set the bucket to keep blobs in S3, or unset ${stray} to keep them in ${ownStore}.`,
      );
    }
    return null;
  }
  // The SDK refuses such a name only at the first presign: every upload answered 500.
  if (/[\s/:]/.test(bucket)) {
    throw new ConfigurationError(
      "GANTRY_S3_BUCKET",
      `GANTRY_S3_BUCKET is "${bucket}": give the bucket's name alone (my-bucket, not s3://my-bucket/path), a path in front of the keys in GANTRY_S3_KEY_PREFIX and an endpoint in GANTRY_S3_ENDPOINT.`,
    );
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
  };
  if (settings.s3Endpoint !== undefined) options.endpoint = settings.s3Endpoint;
  if (settings.s3KeyPrefix !== undefined) options.keyPrefix = settings.s3KeyPrefix;
  return options;
}

/** Where the blobs live, without credentials: `s3://bucket/prefix` (and the endpoint). */
export function describeS3(options: S3BlobStoreOptions): string {
  const where = `s3://${options.bucket}/${options.keyPrefix ?? ""}`;
  if (options.endpoint === undefined) return where;
  // The banner lands in logs: an endpoint's user and password are not shown there.
  const endpoint = new URL(options.endpoint);
  endpoint.username = "";
  endpoint.password = "";
  return `${where} at ${endpoint.href.replace(/\/$/, "")}`;
}

function endpointUrl(value: string): string {
  const url = URL.canParse(value.trim()) ? new URL(value.trim()) : null;
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    throw new Error("must be an http(s) URL");
  }
  return url.href.replace(/\/$/, "");
}
