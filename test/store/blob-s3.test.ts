import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { PresignedRequest } from "../../shared/blob/port.ts";
import { createS3BlobStore, type S3BlobStoreOptions } from "../../shared/blob/s3.ts";
import {
  EMULATOR_CREDENTIALS,
  type S3Emulator,
  startS3Emulator,
} from "../helpers/aws-emulators.ts";

const CREDENTIALS = EMULATOR_CREDENTIALS;
const PNG = "image/png";
const JSON_TYPE = "application/json";

let server: S3Emulator;
let bucket: string;
let endpoint: string;
let prefix: string;

beforeAll(async () => {
  server = await startS3Emulator();
  ({ bucket, endpoint } = server);
});

afterAll(async () => {
  await server?.close();
});

beforeEach(() => {
  prefix = `t-${randomUUID()}/`;
});

const storeWith = (options: Partial<S3BlobStoreOptions> = {}) =>
  createS3BlobStore({
    bucket,
    region: "us-east-1",
    endpoint,
    forcePathStyle: true,
    credentials: CREDENTIALS,
    keyPrefix: prefix,
    ...options,
  });

const bytes = (n: number, fill = 7) => new Uint8Array(n).fill(fill);

function put(
  request: PresignedRequest,
  body: Uint8Array<ArrayBuffer>,
  headers: Record<string, string> = request.headers,
  url = request.url,
) {
  return fetch(url, { method: request.method, headers, body });
}

/** Status and S3 error code of a refused request (the code from the XML error body). */
async function refusal(response: Response) {
  const text = await response.text();
  return { status: response.status, code: /<Code>([^<]+)<\/Code>/.exec(text)?.[1] ?? text };
}

const SIGNATURE_MISMATCH = { status: 403, code: "SignatureDoesNotMatch" };

describe("s3 blob store against a signature-checking S3 server", () => {
  it("signs content-type and content-length into the upload URL, and no checksum", async () => {
    const before = Date.now();
    const upload = await storeWith().presignPut("inputs/upl_signed", {
      contentType: PNG,
      sizeBytes: 10,
      expiresInSeconds: 300,
    });
    const url = new URL(upload.url);
    expect(url.pathname).toBe(`/${bucket}/${prefix}inputs/upl_signed`);
    expect(url.searchParams.get("X-Amz-SignedHeaders")).toBe("content-length;content-type;host");
    expect(url.searchParams.get("X-Amz-Expires")).toBe("300");
    const names = [...url.searchParams.keys()].map((name) => name.toLowerCase());
    expect(names.filter((name) => name.includes("checksum"))).toEqual([]);
    expect(upload.method).toBe("PUT");
    expect(upload.headers).toEqual({ "content-type": PNG, "content-length": "10" });
    expect(upload.expiresAt.getTime()).toBeGreaterThan(before + 299_000);
    expect(upload.expiresAt.getTime()).toBeLessThanOrEqual(Date.now() + 300_000);
  });

  it("stores an upload made with exactly the signed headers; head and GET see it", async () => {
    const store = storeWith();
    const upload = await store.presignPut("inputs/upl_roundtrip", {
      contentType: PNG,
      sizeBytes: 10,
    });
    const body = bytes(10, 42);
    expect((await put(upload, body)).status).toBe(200);
    expect(await store.head("inputs/upl_roundtrip")).toEqual({ sizeBytes: 10, contentType: PNG });

    const download = await store.presignGet("inputs/upl_roundtrip", { expiresInSeconds: 60 });
    expect(new URL(download).searchParams.get("X-Amz-Expires")).toBe("60");
    const response = await fetch(download);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe(PNG);
    expect(new Uint8Array(await response.arrayBuffer())).toEqual(body);
  });

  it("refuses a body longer or shorter than the signed length", async () => {
    const store = storeWith();
    const upload = await store.presignPut("inputs/upl_length", { contentType: PNG, sizeBytes: 10 });
    // fetch sends the body's real length, as any client would.
    const { "content-length": _, ...typeOnly } = upload.headers;
    expect(await refusal(await put(upload, bytes(11), typeOnly))).toEqual(SIGNATURE_MISMATCH);
    expect(await refusal(await put(upload, bytes(9), typeOnly))).toEqual(SIGNATURE_MISMATCH);
    expect(await store.head("inputs/upl_length")).toBeNull();
    // The same URL with the signed length goes through: the refusals were the signature's.
    expect((await put(upload, bytes(10))).status).toBe(200);
  });

  it("refuses a body of another content type", async () => {
    const store = storeWith();
    const upload = await store.presignPut("inputs/upl_type", { contentType: PNG, sizeBytes: 4 });
    const wrongType = { ...upload.headers, "content-type": "image/jpeg" };
    expect(await refusal(await put(upload, bytes(4), wrongType))).toEqual(SIGNATURE_MISMATCH);
    expect(await store.head("inputs/upl_type")).toBeNull();
    expect((await put(upload, bytes(4))).status).toBe(200);
  });

  it("refuses a tampered signature and a signature moved to another key", async () => {
    const store = storeWith();
    const upload = await store.presignPut("inputs/upl_tamper", { contentType: PNG, sizeBytes: 4 });
    const tampered = new URL(upload.url);
    const signature = tampered.searchParams.get("X-Amz-Signature")!;
    const flipped = `${signature.slice(0, -1)}${signature.endsWith("0") ? "1" : "0"}`;
    tampered.searchParams.set("X-Amz-Signature", flipped);
    const body = bytes(4);
    expect(await refusal(await put(upload, body, upload.headers, tampered.href))).toEqual(
      SIGNATURE_MISMATCH,
    );
    const moved = upload.url.replace("upl_tamper", "upl_other");
    expect(await refusal(await put(upload, body, upload.headers, moved))).toEqual(
      SIGNATURE_MISMATCH,
    );
    expect(await store.head("inputs/upl_other")).toBeNull();
    expect((await put(upload, body)).status).toBe(200);
  });

  it("refuses expired upload and download URLs that are otherwise valid", async () => {
    const store = storeWith();
    const hourAgo = storeWith({ now: () => Date.now() - 3_600_000 });
    const options = { contentType: PNG, sizeBytes: 4, expiresInSeconds: 60 };
    const expired = await hourAgo.presignPut("inputs/upl_expired", options);
    expect(expired.expiresAt.getTime()).toBeLessThan(Date.now());
    expect(await refusal(await put(expired, bytes(4)))).toEqual({
      status: 403,
      code: "AccessDenied",
    });
    expect(
      (await put(await store.presignPut("inputs/upl_expired", options), bytes(4))).status,
    ).toBe(200);

    const staleGet = await hourAgo.presignGet("inputs/upl_expired", { expiresInSeconds: 60 });
    expect(await refusal(await fetch(staleGet))).toEqual({ status: 403, code: "AccessDenied" });
    expect((await fetch(await store.presignGet("inputs/upl_expired"))).status).toBe(200);
  });

  it("binds only the type when the size is unknown; head reports the size to check", async () => {
    const store = storeWith();
    const output = await store.presignPut("outputs/job_x/result.json", {
      contentType: JSON_TYPE,
      maxBytes: 100,
    });
    expect(output.headers).toEqual({ "content-type": JSON_TYPE });
    expect(new URL(output.url).searchParams.get("X-Amz-SignedHeaders")).toBe("content-type;host");
    const wrongType = { "content-type": "text/plain" };
    expect(await refusal(await put(output, bytes(50), wrongType))).toEqual(SIGNATURE_MISMATCH);
    // S3 cannot bound an unsigned length: the caller compares head's size with maxBytes.
    expect((await put(output, bytes(150))).status).toBe(200);
    expect(await store.head("outputs/job_x/result.json")).toEqual({
      sizeBytes: 150,
      contentType: JSON_TYPE,
    });
  });

  it("head is null for a missing key; delete removes a blob and tolerates a missing one", async () => {
    const store = storeWith();
    expect(await store.head("inputs/upl_missing")).toBeNull();
    const upload = await store.presignPut("inputs/upl_delete", { contentType: PNG, sizeBytes: 3 });
    expect((await put(upload, bytes(3))).status).toBe(200);
    await store.delete("inputs/upl_delete");
    expect(await store.head("inputs/upl_delete")).toBeNull();
    await expect(store.delete("inputs/upl_delete")).resolves.toBeUndefined();
  });

  it("keeps every key under keyPrefix and refuses unsafe keys", async () => {
    const store = storeWith();
    const upload = await store.presignPut("inputs/upl_prefixed", {
      contentType: PNG,
      sizeBytes: 3,
    });
    expect((await put(upload, bytes(3))).status).toBe(200);
    const unprefixed = storeWith({ keyPrefix: "" });
    expect(await unprefixed.head(`${prefix}inputs/upl_prefixed`)).toEqual({
      sizeBytes: 3,
      contentType: PNG,
    });
    expect(await unprefixed.head("inputs/upl_prefixed")).toBeNull();
    await expect(
      store.presignPut("../escape", { contentType: PNG, sizeBytes: 1 }),
    ).rejects.toThrow();
    await expect(store.presignGet("/absolute")).rejects.toThrow();
  });

  it("refuses presign options S3 cannot honour", async () => {
    const store = storeWith();
    const put = (options: Parameters<typeof store.presignPut>[1]) =>
      store.presignPut("inputs/upl_options", options);
    await expect(put({ contentType: PNG })).rejects.toThrow(/sizeBytes or maxBytes/);
    await expect(put({ contentType: PNG, sizeBytes: 11, maxBytes: 10 })).rejects.toThrow(
      /above maxBytes/,
    );
    await expect(put({ contentType: PNG, sizeBytes: 1, expiresInSeconds: 0 })).rejects.toThrow(
      /expiresInSeconds/,
    );
    await expect(
      put({ contentType: PNG, sizeBytes: 1, expiresInSeconds: 8 * 24 * 3600 }),
    ).rejects.toThrow(/expiresInSeconds/);
    expect(() => storeWith({ defaultExpiresInSeconds: 1.5 })).toThrow(/expiresInSeconds/);
  });
});
