import sharp, { type Sharp } from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ArtifactFixture, startArtifactFixture } from "../helpers/artifact-fixture.ts";
import { followJob } from "../helpers/sse.ts";

/**
 * Background removal through the gateway and a real agent (the fixture's small mask model,
 * so no ISNet run): the content types the gateway takes, the options as the catalog and
 * the pipeline read them, and a damaged file failing once.
 */
let fx: ArtifactFixture;

beforeAll(async () => {
  fx = await startArtifactFixture();
});
afterAll(() => fx?.close());

/** A white box on black: the fixture's model sees the box as foreground. */
async function boxImage(): Promise<Sharp> {
  const pixels = Buffer.alloc(80 * 50 * 3);
  for (let y = 10; y < 40; y++) {
    for (let x = 20; x < 60; x++) pixels.fill(255, (y * 80 + x) * 3, (y * 80 + x) * 3 + 3);
  }
  return sharp(pixels, { raw: { width: 80, height: 50, channels: 3 } });
}

async function upload(bytes: Uint8Array, contentType: string): Promise<string> {
  const response = await fx.api("/v1/uploads", {
    method: "POST",
    json: { content_type: contentType, size_bytes: bytes.length },
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

interface Job {
  status: string;
  attempt: number;
  output?: Record<string, unknown>;
  error?: { type: string; code: string };
}

async function run(
  image: string,
  params: Record<string, unknown> = {},
): Promise<Job & { id: string }> {
  const submitted = await fx.api("/v1/jobs", {
    method: "POST",
    json: { model: "rmbg", input: { image, ...params } },
  });
  expect(submitted.status).toBe(202);
  const { id } = (await submitted.json()) as { id: string };
  await followJob((path) => fx.api(path), id);
  return { ...((await (await fx.api(`/v1/jobs/${id}`)).json()) as Job), id };
}

async function artifact(job: { id: string }, name: string) {
  const response = await fx.api(`/v1/jobs/${job.id}/artifacts/${name}`);
  expect(response.status).toBe(200);
  return {
    contentType: response.headers.get("content-type"),
    bytes: Buffer.from(await response.arrayBuffer()),
  };
}

describe("rmbg through the gateway and an agent", () => {
  it("takes AVIF, returns WebP on a background colour, and records the foreground", async () => {
    const avif = await (await boxImage()).avif({ lossless: true }).toBuffer();
    const job = await run(await upload(avif, "image/avif"), {
      format: "webp",
      background: "#ff0000",
    });
    expect(job.status).toBe("succeeded");
    expect(job.output).toMatchObject({
      width: 80,
      height: 50,
      format: "webp",
      source: { format: "heif", pages: 1 },
    });
    // The box is 40×30 at (20, 10); the model's 32² mask resized back blurs it by a pixel.
    const bbox = job.output?.bbox as { x: number; y: number; width: number; height: number };
    for (const [got, want] of [
      [bbox.x, 20],
      [bbox.y, 10],
      [bbox.width, 40],
      [bbox.height, 30],
    ])
      expect(Math.abs(got! - want!)).toBeLessThanOrEqual(1);
    expect(Math.abs((job.output?.coverage as number) - (40 * 30) / (80 * 50))).toBeLessThan(0.03);
    const image = await artifact(job, "image");
    expect(image.contentType).toBe("image/webp");
    const { data, info } = await sharp(image.bytes).raw().toBuffer({ resolveWithObject: true });
    // Opaque: the background colour stands where the black was.
    expect(info.channels).toBe(3);
    const at = (x: number, y: number) => [...data.subarray((y * 80 + x) * 3, (y * 80 + x) * 3 + 3)];
    const [r, g, b] = at(3, 3);
    expect(r).toBeGreaterThan(200);
    expect(g! + b!).toBeLessThan(60);
    expect(at(40, 25).every((channel) => channel > 200)).toBe(true);
    expect((await artifact(job, "mask")).contentType).toBe("image/webp");
  });

  it("makes only the mask when asked", async () => {
    const png = await (await boxImage()).png().toBuffer();
    const job = await run(await upload(png, "image/png"), { mask_only: true });
    expect(job.status).toBe("succeeded");
    expect(job.output).toHaveProperty("mask");
    expect(job.output).not.toHaveProperty("image");
  });

  it("fails a truncated JPEG with invalid_image on its first attempt, no retry", async () => {
    const jpeg = await (await boxImage()).jpeg().toBuffer();
    const job = await run(await upload(jpeg.subarray(0, jpeg.length - 200), "image/jpeg"));
    expect(job).toMatchObject({
      status: "failed",
      attempt: 1,
      error: { type: "permanent", code: "invalid_image" },
    });
  });

  it("refuses parameters the catalog does not know, before queueing", async () => {
    const png = await (await boxImage()).png().toBuffer();
    const image = await upload(png, "image/png");
    const response = await fx.api("/v1/jobs", {
      method: "POST",
      json: { model: "rmbg", input: { image, format: "bmp", background: "red" } },
    });
    expect(response.status).toBe(422);
    expect(((await response.json()) as { code: string }).code).toBe("invalid_input");
  });

  it("answers 415 to HEIC, saying what to send instead", async () => {
    const response = await fx.api("/v1/uploads", {
      method: "POST",
      json: { content_type: "image/heic", size_bytes: 1000 },
    });
    expect(response.status).toBe(415);
    const problem = (await response.json()) as { code: string; detail: string };
    expect(problem.code).toBe("unsupported_content_type");
    expect(problem.detail).toMatch(/HEIC .*JPEG, PNG, WebP or AVIF/);
  });
});
