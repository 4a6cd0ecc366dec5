/**
 * A Node gateway whose S3 bucket cannot be reached (the endpoint down, an outage): what needs
 * the bucket is answered 503 `blob_store_unavailable` with Retry-After, which clients and
 * agents retry, rather than a 500 internal_error that says nothing. It was a 500 on
 * POST /v1/jobs naming an upload, ECONNREFUSED in the log. A bucket that refuses the
 * gateway's credentials (403) is the operator's to fix: `misconfigured`, naming the setting.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  EMULATOR_CREDENTIALS,
  EMULATOR_REGION,
  type S3Emulator,
  startS3Emulator,
} from "../helpers/aws-emulators.ts";
import { startTestGateway, type TestGateway, uploadFile } from "../helpers/test-gateway.ts";

let s3: S3Emulator | null = null;
let gw: TestGateway;
let refused: TestGateway;

beforeAll(async () => {
  s3 = await startS3Emulator();
  const bucket = {
    bucket: s3.bucket,
    region: EMULATOR_REGION,
    endpoint: s3.endpoint,
    forcePathStyle: true,
  };
  gw = await startTestGateway({
    models: ["noop"],
    s3: { ...bucket, credentials: EMULATOR_CREDENTIALS },
  });
  // s3rver knows one account: any other key is refused 403.
  const stranger = { accessKeyId: "STRANGER", secretAccessKey: "STRANGER" };
  refused = await startTestGateway({ models: ["noop"], s3: { ...bucket, credentials: stranger } });
});

afterAll(async () => {
  await gw?.close();
  await refused?.close();
  await s3?.close();
});

describe("a gateway whose S3 bucket refuses its credentials", () => {
  it("answers a submit naming an upload 500 misconfigured, naming GANTRY_S3_BUCKET", async () => {
    const presign = await refused.api("/v1/uploads", {
      method: "POST",
      json: { content_type: "image/png", size_bytes: 4 },
    });
    const { id } = (await presign.json()) as { id: string };
    const response = await refused.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { image: id } },
    });
    expect(response.status).toBe(500);
    expect(await response.json()).toMatchObject({
      code: "misconfigured",
      setting: "GANTRY_S3_BUCKET",
    });
  });
});

describe("a gateway whose S3 bucket is down", () => {
  it("answers a submit naming an upload 503 blob_store_unavailable with Retry-After", async () => {
    const upload = await uploadFile(gw, new Uint8Array([137, 80, 78, 71]), "image/png");
    await s3?.close();
    s3 = null;
    const response = await gw.api("/v1/jobs", {
      method: "POST",
      json: { model: "noop", input: { image: upload } },
    });
    expect(response.status).toBe(503);
    expect(response.headers.get("content-type")).toContain("application/problem+json");
    expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await response.json()).toMatchObject({
      code: "blob_store_unavailable",
      detail: "The blob store could not be reached: try again shortly.",
    });
  });
});
