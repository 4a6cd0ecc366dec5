import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp, { type Sharp } from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backgroundRemovalPipeline } from "../../gpu-agent/pipelines/background-removal/index.ts";
import {
  type LoadedPipeline,
  OutputWithArtifacts,
  PipelineFailure,
} from "../../gpu-agent/pipelines/pipeline.ts";
import { resolveModels, toModelConfigs } from "../../gpu-agent/registry/index.ts";
import { DeviceThread } from "../../gpu-agent/runner/device-thread.ts";
import { imageRequest } from "../helpers/onnx-models.ts";
import { maskIoU, type ProductPhoto, productPhoto } from "../helpers/product-photo.ts";

/**
 * The real ISNet (the `rmbg` model of the embedded default, the fp16 medium variant) on a
 * generated product photo. Each run costs about 1.5 s on two cores, so the runs are few
 * (one per input format) and every assertion about a run shares it.
 */
const ISNET_DEFAULT_SHA256 = "b6e8497ba978a6f5fbb647e419d2696cd80df5a23cb6a8ea532021911bd76acb";

const dir = mkdtempSync(join(tmpdir(), "gantry-isnet-"));
const device = new DeviceThread();
let pipeline: LoadedPipeline;
let modelFile: string;
let photo: ProductPhoto;

interface Cut {
  output: Record<string, unknown>;
  mask: Buffer;
  /** The cut-out's alpha channel. */
  alpha: Buffer;
}

const runs = new Map<string, Promise<Cut>>();

/** One real run per input, shared by every test that asks about it. */
function cut(name: string, bytes: () => Promise<Uint8Array>): Promise<Cut> {
  let run = runs.get(name);
  if (!run) {
    run = (async () => {
      const result = await pipeline.run(imageRequest("rmbg", await bytes()));
      expect(result).toBeInstanceOf(OutputWithArtifacts);
      const { output, artifacts } = result as OutputWithArtifacts;
      const mask = await sharp(artifacts.mask!.bytes).extractChannel(0).raw().toBuffer();
      const alpha = await sharp(artifacts.image!.bytes).extractChannel(3).raw().toBuffer();
      return { output, mask, alpha };
    })();
    runs.set(name, run);
  }
  return run;
}

const encoded = (encode: (image: Sharp) => Sharp) => async () =>
  encode(sharp(photo.png)).toBuffer();

beforeAll(async () => {
  photo = await productPhoto();
  const models = await resolveModels(null, { cacheDir: join(dir, "cache"), include: ["rmbg"] });
  const config = toModelConfigs(models).rmbg!;
  modelFile = config.file!;
  pipeline = await backgroundRemovalPipeline.load({
    provider: "cpu",
    threads: 2,
    createSession: device.sessionFactory("cpu", 2),
    modelId: "rmbg",
    config,
  });
}, 120_000);

afterAll(async () => {
  await pipeline?.release();
  await device.stop();
  rmSync(dir, { recursive: true, force: true });
});

// A loaded CI box has been seen to take 20-40 s a run on two shared cores.
describe("rmbg: ISNet from the npm package's chunks", { timeout: 180_000 }, () => {
  it("is assembled once into the model cache and matches its sha256", async () => {
    expect(modelFile).toBe(join(dir, "cache", ISNET_DEFAULT_SHA256, "model"));
    const bytes = readFileSync(modelFile);
    expect(createHash("sha256").update(bytes).digest("hex")).toBe(ISNET_DEFAULT_SHA256);
    const before = statSync(modelFile).mtimeMs;
    const again = await resolveModels(null, { cacheDir: join(dir, "cache"), include: ["rmbg"] });
    expect(again[0]?.files.model).toBe(modelFile);
    expect(statSync(modelFile).mtimeMs).toBe(before);
  });

  it("cuts a product out of a cluttered background (mask IoU >= 0.9, alpha 0 behind)", async () => {
    const { output, mask, alpha } = await cut("png", async () => photo.png);
    expect(maskIoU(mask, photo.truth)).toBeGreaterThanOrEqual(0.9);
    expect(output).toMatchObject({
      width: 640,
      height: 480,
      format: "png",
      input_size: { width: 1024, height: 1024 },
      source: { format: "png", pages: 1 },
    });
    // Background well away from the object (more than 16 px from any of its pixels).
    const far = farBackground(photo, 16);
    const clear = far.filter((i) => alpha[i] === 0).length;
    expect(clear / far.length).toBeGreaterThanOrEqual(0.99);
    // The foreground's box and share of the picture, as the truth has them (within a few px).
    const bbox = output.bbox as { x: number; y: number; width: number; height: number };
    expect(Math.abs(bbox.x - 250)).toBeLessThanOrEqual(6);
    expect(Math.abs(bbox.y - 95)).toBeLessThanOrEqual(6);
    expect(Math.abs(bbox.x + bbox.width - 390)).toBeLessThanOrEqual(8);
    expect(Math.abs(bbox.y + bbox.height - 430)).toBeLessThanOrEqual(6);
    const truthCoverage = photo.truth.filter((v) => v >= 128).length / photo.truth.length;
    expect(Math.abs((output.coverage as number) - truthCoverage)).toBeLessThan(0.01);
  });

  it.each([
    // A phone's portrait shot: stored turned a quarter left, EXIF orientation 6 stands it up.
    [
      "jpeg (EXIF-rotated)",
      encoded((i) => i.rotate(-90).jpeg({ quality: 92 }).withMetadata({ orientation: 6 })),
    ],
    ["webp", encoded((i) => i.webp({ quality: 90 }))],
    ["avif", encoded((i) => i.avif({ quality: 70 }))],
    ["tiff", encoded((i) => i.tiff({ compression: "lzw" }))],
    ["gif", encoded((i) => i.gif())],
  ] as const)("gives the same mask from %s, upright", async (name, bytes) => {
    const reference = await cut("png", async () => photo.png);
    const { output, mask } = await cut(name, bytes);
    expect(output).toMatchObject({ width: 640, height: 480 });
    expect(maskIoU(mask, reference.mask)).toBeGreaterThanOrEqual(0.97);
    expect(maskIoU(mask, photo.truth)).toBeGreaterThanOrEqual(0.9);
  });

  it("fails a truncated JPEG permanently with invalid_image, before any inference", async () => {
    const jpeg = await sharp(photo.png).jpeg().toBuffer();
    const failure = await pipeline
      .run(imageRequest("rmbg", jpeg.subarray(0, Math.floor(jpeg.length * 0.6))))
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(failure).toBeInstanceOf(PipelineFailure);
    expect((failure as PipelineFailure).jobError).toMatchObject({
      type: "permanent",
      code: "invalid_image",
    });
  });
});

/** Pixels whose truth is 0 and that lie more than `margin` px from every object pixel. */
function farBackground({ width, height, truth }: ProductPhoto, margin: number): number[] {
  let minX = width;
  let minY = height;
  let maxX = 0;
  let maxY = 0;
  for (let i = 0; i < truth.length; i++) {
    if (truth[i] === 0) continue;
    const x = i % width;
    const y = Math.floor(i / width);
    minX = Math.min(minX, x);
    maxX = Math.max(maxX, x);
    minY = Math.min(minY, y);
    maxY = Math.max(maxY, y);
  }
  const far: number[] = [];
  for (let i = 0; i < truth.length; i++) {
    const x = i % width;
    const y = Math.floor(i / width);
    const inside =
      x >= minX - margin && x <= maxX + margin && y >= minY - margin && y <= maxY + margin;
    if (!inside) far.push(i);
  }
  return far;
}
