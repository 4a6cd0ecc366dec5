import sharp, { type Sharp } from "sharp";
import { describe, expect, it } from "vitest";
import { PipelineFailure } from "../../gpu-agent/pipelines/pipeline.ts";
import { decodeImage } from "../../gpu-agent/pipelines/vision/decode.ts";
import { IMAGE_TYPES, UNDECODED_IMAGE_TYPES } from "../../shared/tasks/task.ts";

/** 24×16: left half red, right half blue, so orientation and colour are both visible. */
async function halves(): Promise<Buffer> {
  const pixels = Buffer.alloc(24 * 16 * 3);
  for (let y = 0; y < 16; y++) {
    for (let x = 0; x < 24; x++)
      pixels.set(x < 12 ? [220, 20, 20] : [20, 20, 220], (y * 24 + x) * 3);
  }
  return pixels;
}
const raw = async () => sharp(await halves(), { raw: { width: 24, height: 16, channels: 3 } });
const pixel = (image: { data: Uint8Array; width: number }, x: number, y: number) => [
  ...image.data.subarray((y * image.width + x) * 3, (y * image.width + x) * 3 + 3),
];

async function failureOf(bytes: Uint8Array): Promise<PipelineFailure> {
  const error = await decodeImage(bytes).then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(PipelineFailure);
  return error as PipelineFailure;
}

describe("the vision decoder", () => {
  it("decodes every content type the gateway accepts for image tasks, and none it refuses", async () => {
    const encoders: Record<string, (image: Sharp) => Sharp> = {
      "image/png": (i) => i.png(),
      "image/jpeg": (i) => i.jpeg(),
      "image/webp": (i) => i.webp(),
      "image/avif": (i) => i.avif(),
      "image/tiff": (i) => i.tiff(),
      "image/gif": (i) => i.gif(),
    };
    expect(Object.keys(encoders).sort()).toEqual([...IMAGE_TYPES].sort());
    for (const type of IMAGE_TYPES) {
      const bytes = await encoders[type]!(await raw()).toBuffer();
      const image = await decodeImage(bytes);
      expect([image.width, image.height], type).toEqual([24, 16]);
      expect(pixel(image, 2, 8)[0], type).toBeGreaterThan(150);
    }
    for (const type of Object.keys(UNDECODED_IMAGE_TYPES)) expect(IMAGE_TYPES).not.toContain(type);
  });

  it("converts 16-bit PNG to 8-bit sRGB", async () => {
    const png16 = await (await raw()).toColourspace("rgb16").png().toBuffer();
    expect((await sharp(png16).metadata()).depth).toBe("ushort");
    const image = await decodeImage(png16);
    expect(image.data.length).toBe(24 * 16 * 3);
    expect(pixel(image, 2, 2).map((v) => Math.round(v / 10))).toEqual([22, 2, 2]);
  });

  it("converts a CMYK JPEG to sRGB", async () => {
    const cmyk = await (await raw()).toColourspace("cmyk").jpeg({ quality: 95 }).toBuffer();
    expect((await sharp(cmyk).metadata()).space).toBe("cmyk");
    const image = await decodeImage(cmyk);
    // Without an ICC profile the conversion is naive and loses saturation; the hues stay.
    const [r, g, b] = pixel(image, 20, 8);
    expect(b! - Math.max(r!, g!)).toBeGreaterThan(40);
    const [r2, g2, b2] = pixel(image, 3, 8);
    expect(r2! - Math.max(g2!, b2!)).toBeGreaterThan(40);
  });

  it("stands an EXIF-rotated JPEG upright", async () => {
    const stored = await (await raw())
      .rotate(-90)
      .jpeg()
      .withMetadata({ orientation: 6 })
      .toBuffer();
    expect(await sharp(stored).metadata()).toMatchObject({ width: 16, height: 24, orientation: 6 });
    const image = await decodeImage(stored);
    expect([image.width, image.height]).toEqual([24, 16]);
    expect(pixel(image, 2, 8)[0]).toBeGreaterThan(150);
    expect(pixel(image, 21, 8)[2]).toBeGreaterThan(150);
  });

  it("reads the first frame of an animated GIF and the first page of a TIFF, and says so", async () => {
    const red = await (await raw()).extract({ left: 0, top: 0, width: 12, height: 16 }).toBuffer();
    const frames = sharp(
      Buffer.concat([
        await sharp(red, { raw: { width: 12, height: 16, channels: 3 } })
          .raw()
          .toBuffer(),
        Buffer.alloc(12 * 16 * 3, 30),
      ]),
      { raw: { width: 12, height: 32, channels: 3, pageHeight: 16 } },
    );
    const gif = await frames.clone().gif().toBuffer();
    const tiff = await frames.clone().tiff().toBuffer();
    for (const [bytes, format] of [
      [gif, "gif"],
      [tiff, "tiff"],
    ] as const) {
      const image = await decodeImage(bytes);
      expect({ format: image.format, pages: image.pages }).toEqual({ format, pages: 2 });
      expect([image.width, image.height]).toEqual([12, 16]);
      expect(pixel(image, 5, 5)[0]).toBeGreaterThan(150);
    }
  });

  it("flattens transparency onto white (or the colour asked)", async () => {
    const clear = await sharp({
      create: { width: 4, height: 4, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } },
    })
      .png()
      .toBuffer();
    expect(pixel(await decodeImage(clear), 1, 1)).toEqual([255, 255, 255]);
    expect(pixel(await decodeImage(clear, "#102030"), 1, 1)).toEqual([16, 32, 48]);
  });

  it("fails truncated, corrupt, empty and SVG input permanently with invalid_image", async () => {
    const jpeg = await (await raw()).jpeg().toBuffer();
    const svg = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>');
    for (const bytes of [
      jpeg.subarray(0, jpeg.length - 40),
      Buffer.from("definitely not an image"),
      new Uint8Array(0),
      svg,
    ]) {
      const failure = await failureOf(bytes);
      expect(failure.jobError).toMatchObject({ type: "permanent", code: "invalid_image" });
    }
  });
});
