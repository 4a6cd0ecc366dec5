/**
 * Small inputs inline in the claim: the gateway puts an upload it holds into the claim
 * when it is small enough, and sends a larger one (or one behind S3) by URL only; the
 * agent uses inline bytes without a download, under the same size bound as a download.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inlineUpload } from "../../gateway/jobs/inline-inputs.ts";
import { downloadInputs, JobFailure } from "../../gpu-agent/transfer/files.ts";
import { createDiskBlobStore } from "../../shared/blob/disk.ts";
import { randomToken } from "../../shared/ids.ts";
import { Claim, MAX_INLINE_INPUT_BYTES } from "../../shared/protocol/agent.ts";

const dir = mkdtempSync(join(tmpdir(), "gantry-inline-"));
const secret = randomToken(32);
const blobs = createDiskBlobStore({
  root: join(dir, "blobs"),
  publicBaseUrl: "http://gantry.test",
  secret,
});
const warnings: unknown[] = [];
const gateway = {
  localBlobs: { backend: blobs, secret },
  log: {
    info: () => {},
    warn: (data: unknown) => warnings.push(data),
    error: () => {},
    debug: () => {},
  },
} as unknown as Parameters<typeof inlineUpload>[0];

async function put(key: string, bytes: Uint8Array, contentType = "image/png") {
  const body = new Blob([new Uint8Array(bytes)]).stream();
  await blobs.write(key, body, { contentType, maxBytes: 1 << 24 });
}

const bytesOf = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31) % 256);

beforeAll(async () => {
  await put("uploads/upl_small", bytesOf(1000));
  await put("uploads/upl_edge", bytesOf(2048), "image/jpeg");
  await put("uploads/upl_large", bytesOf(2049));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the gateway inlines small uploads in the claim", () => {
  it("carries an upload up to the bound inline, with its content type", async () => {
    const small = await inlineUpload(gateway, "uploads/upl_small", 2048);
    expect(small?.content_type).toBe("image/png");
    expect(new Uint8Array(Buffer.from(small!.data_base64, "base64"))).toEqual(bytesOf(1000));
    const edge = await inlineUpload(gateway, "uploads/upl_edge", 2048);
    expect(edge).toMatchObject({ content_type: "image/jpeg" });
    expect(Buffer.from(edge!.data_base64, "base64").byteLength).toBe(2048);
  });

  it("sends an upload larger than the bound by URL only", async () => {
    expect(await inlineUpload(gateway, "uploads/upl_large", 2048)).toBeNull();
    // The default bound is the protocol's.
    await put("uploads/upl_big", bytesOf(MAX_INLINE_INPUT_BYTES + 1));
    expect(await inlineUpload(gateway, "uploads/upl_big")).toBeNull();
    expect(await inlineUpload(gateway, "uploads/upl_small")).not.toBeNull();
  });

  it("sends the URL alone when the blob is missing or the blobs are not this gateway's", async () => {
    expect(await inlineUpload(gateway, "uploads/upl_missing")).toBeNull();
    const behindS3 = { log: gateway.log } as Parameters<typeof inlineUpload>[0];
    expect(await inlineUpload(behindS3, "uploads/upl_small")).toBeNull();
    expect(warnings).toEqual([]);
  });

  it("makes a claim input the protocol accepts", async () => {
    const inline = await inlineUpload(gateway, "uploads/upl_small");
    const input = { url: "http://gantry.test/v1/blobs/x", source: "upload", ...inline };
    expect(Claim.shape.inputs.safeParse({ image: input }).success).toBe(true);
    const bad = { ...input, data_base64: "not base64!" };
    expect(Claim.shape.inputs.safeParse({ image: bad }).success).toBe(false);
  });
});

describe("the agent uses inline inputs", () => {
  const noFetch = (async () => {
    throw new Error("no download expected");
  }) as unknown as typeof fetch;

  it("takes inline bytes without downloading", async () => {
    const data_base64 = Buffer.from(bytesOf(1000)).toString("base64");
    const files = await downloadInputs(
      { image: { url: "http://gantry.test/x", content_type: "image/png", data_base64 } },
      { maxInputBytes: 4096, fetch: noFetch },
    );
    expect(files.image!.contentType).toBe("image/png");
    expect(files.image!.bytes).toEqual(bytesOf(1000));
    // An array of its own: nothing of a pooled buffer crosses to the runner child.
    expect(files.image!.bytes.byteOffset).toBe(0);
    expect(files.image!.bytes.buffer.byteLength).toBe(1000);
  });

  it("refuses an inline input over the agent's bound, as it would a download", async () => {
    const data_base64 = Buffer.from(bytesOf(5000)).toString("base64");
    const outcome = downloadInputs(
      { image: { url: "http://gantry.test/x", content_type: null, data_base64 } },
      { maxInputBytes: 4096, fetch: noFetch },
    );
    await expect(outcome).rejects.toBeInstanceOf(JobFailure);
    await expect(outcome).rejects.toMatchObject({
      error: { type: "permanent", code: "input_too_large" },
    });
  });

  it("downloads the URL when the claim has no inline bytes", async () => {
    const urls: string[] = [];
    const fetchUrl = (async (input: string | URL | Request) => {
      urls.push(String(input));
      return new Response(new Uint8Array(bytesOf(3000)), {
        headers: { "content-type": "image/webp" },
      });
    }) as typeof fetch;
    const files = await downloadInputs(
      { image: { url: "http://gantry.test/large", content_type: null, source: "upload" } },
      { maxInputBytes: 4096, fetch: fetchUrl },
    );
    expect(urls).toEqual(["http://gantry.test/large"]);
    expect(files.image).toEqual({ bytes: bytesOf(3000), contentType: "image/webp" });
  });
});
