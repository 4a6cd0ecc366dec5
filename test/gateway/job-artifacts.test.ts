import { createHash } from "node:crypto";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_INLINE_ARTIFACT_BYTES } from "../../gpu-agent/supervisor/artifacts.ts";
import { type ArtifactFixture, startArtifactFixture } from "../helpers/artifact-fixture.ts";
import { followJob } from "../helpers/sse.ts";

let fx: ArtifactFixture;

beforeAll(async () => {
  fx = await startArtifactFixture();
});
afterAll(() => fx?.close());

/** Seeded noise: a cutout of it compresses badly, so the PNG is far over the inline limit. */
async function noisyPng(width: number, height: number): Promise<Uint8Array> {
  const pixels = Buffer.alloc(width * height * 3);
  let state = 12345;
  for (let i = 0; i < pixels.length; i++) {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    pixels[i] = state >>> 24;
  }
  return sharp(pixels, { raw: { width, height, channels: 3 } })
    .png()
    .toBuffer();
}

async function upload(bytes: Uint8Array): Promise<string> {
  const response = await fx.api("/v1/uploads", {
    method: "POST",
    json: { content_type: "image/png", size_bytes: bytes.length },
  });
  expect(response.status).toBe(201);
  const presigned = (await response.json()) as { id: string; url: string; headers: object };
  const put = await fetch(presigned.url, {
    method: "PUT",
    headers: presigned.headers as Record<string, string>,
    body: new Uint8Array(bytes),
  });
  expect(put.ok).toBe(true);
  return presigned.id;
}

interface ArtifactRef {
  content_type: string;
  size_bytes: number;
  sha256: string;
}

describe("job artifacts end to end (rmbg, background-removal)", () => {
  let jobId: string;
  let reference: ArtifactRef;

  beforeAll(async () => {
    const image = await upload(await noisyPng(600, 600));
    const submitted = await fx.api("/v1/jobs", {
      method: "POST",
      json: { model: "rmbg", input: { image } },
    });
    expect(submitted.status).toBe(202);
    jobId = ((await submitted.json()) as { id: string }).id;
    const { statuses } = await followJob((path) => fx.api(path), jobId);
    expect(statuses.at(-1)).toBe("succeeded");
    const job = (await (await fx.api(`/v1/jobs/${jobId}`)).json()) as {
      output: {
        width: number;
        height: number;
        format: string;
        image: ArtifactRef;
        mask: ArtifactRef;
      };
    };
    expect(job.output).toMatchObject({ width: 600, height: 600, format: "png" });
    reference = job.output.image;
    expect(reference).not.toHaveProperty("base64");
  });

  it("redirects to the PNG the agent uploaded: alpha, original size, as the output says", async () => {
    const response = await fx.api(`/v1/jobs/${jobId}/artifacts/image`, {
      redirect: "manual",
    });
    expect(response.status).toBe(302);
    expect(response.headers.get("cache-control")).toBe("no-store");
    const location = response.headers.get("location") ?? "";
    // The presigned URL carries its own grant: no API key goes with it.
    const download = await fetch(new URL(location, fx.node.url));
    expect(download.status).toBe(200);
    expect(download.headers.get("content-type")).toBe("image/png");
    const bytes = new Uint8Array(await download.arrayBuffer());
    expect(bytes.byteLength).toBeGreaterThan(MAX_INLINE_ARTIFACT_BYTES);
    expect(reference).toMatchObject({ content_type: "image/png", size_bytes: bytes.byteLength });
    expect(createHash("sha256").update(bytes).digest("hex")).toBe(reference.sha256);
    expect(await sharp(bytes).metadata()).toMatchObject({
      format: "png",
      width: 600,
      height: 600,
      channels: 4,
      hasAlpha: true,
    });
  });

  it("follows the redirect like any HTTP client", async () => {
    const response = await fx.api(`/v1/jobs/${jobId}/artifacts/image`);
    expect(response.status).toBe(200);
    expect((await response.arrayBuffer()).byteLength).toBe(reference.size_bytes);
  });

  it("answers 404 to another tenant, as for a job that does not exist", async () => {
    const otherKey = await fx.addTenant("ten_other");
    const response = await fx.api(`/v1/jobs/${jobId}/artifacts/image`, {
      apiKey: otherKey,
      redirect: "manual",
    });
    expect(response.status).toBe(404);
    expect(response.headers.get("location")).toBeNull();
  });

  it("answers 404 to a name the output does not list, declared or not", async () => {
    for (const name of ["image_png", "nothing", "width", "result.json"]) {
      const response = await fx.api(`/v1/jobs/${jobId}/artifacts/${name}`, {
        redirect: "manual",
      });
      expect(response.status, name).toBe(404);
    }
  });
});
