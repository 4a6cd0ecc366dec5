/**
 * The S3 blob settings both gateways read (shared/blob/s3-settings.ts): what they make of a
 * bucket, what they refuse, and what the banner shows of them.
 */
import { describe, expect, it } from "vitest";
import { describeS3, s3BlobOptions } from "../../shared/blob/s3-settings.ts";
import { ConfigurationError } from "../../shared/errors.ts";

describe("s3BlobOptions", () => {
  it("is null without a bucket: the gateway's own store", () => {
    expect(s3BlobOptions({}, "the data directory")).toBeNull();
  });

  it("refuses an S3 setting without the bucket, naming both and the store kept", () => {
    const read = () => s3BlobOptions({ s3KeyPrefix: "a/" }, "the data directory");
    expect(read).toThrow(ConfigurationError);
    expect(read).toThrow(
      "GANTRY_S3_KEY_PREFIX is set but GANTRY_S3_BUCKET is not: set the bucket to keep blobs in S3, or unset GANTRY_S3_KEY_PREFIX to keep them in the data directory.",
    );
  });

  it("refuses a bucket given as a URL or a path, naming the settings for each part", () => {
    for (const bucket of ["s3://my-bucket", "my-bucket/gantry", "my bucket"]) {
      const read = () => s3BlobOptions({ s3Bucket: bucket, s3Region: "eu-west-1" }, "R2");
      expect(read).toThrow(ConfigurationError);
      expect(read).toThrow(`GANTRY_S3_BUCKET is "${bucket}": give the bucket's name alone`);
    }
  });

  it("refuses a bucket without its region", () => {
    expect(() => s3BlobOptions({ s3Bucket: "b" }, "R2")).toThrow("GANTRY_S3_REGION is not set");
  });

  it("leaves credentials to the caller (the SDK's chain on Node)", () => {
    expect(
      s3BlobOptions({ s3Bucket: "b", s3Region: "eu-west-1", s3KeyPrefix: "p/" }, "R2"),
    ).toEqual({ bucket: "b", region: "eu-west-1", forcePathStyle: false, keyPrefix: "p/" });
  });
});

describe("describeS3", () => {
  it("names the bucket, prefix and endpoint, never an endpoint's password", () => {
    const where = describeS3({
      bucket: "b",
      region: "us-east-1",
      keyPrefix: "p/",
      endpoint: "http://minio:secret@127.0.0.1:9000",
    });
    expect(where).toBe("s3://b/p/ at http://127.0.0.1:9000");
    expect(describeS3({ bucket: "b", region: "eu-west-1" })).toBe("s3://b/");
  });
});
