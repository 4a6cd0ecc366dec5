import sharp, { type Sharp } from "sharp";
import type { RgbImage } from "../vision/decode.ts";

export type OutputFormat = "png" | "webp";

/** Where the foreground is, in original pixels: alpha at least half counts as foreground. */
export interface Foreground {
  /** The smallest rectangle holding every foreground pixel; null when there is none. */
  bbox: { x: number; y: number; width: number; height: number } | null;
  /** Foreground pixels over all pixels, 0..1. */
  coverage: number;
}

/** Alpha at or above this is foreground for the bounding box and coverage. */
const FOREGROUND_ALPHA = 128;

export function foreground(alpha: Uint8Array, width: number, height: number): Foreground {
  let minX = width;
  let minY = height;
  let maxX = -1;
  let maxY = -1;
  let count = 0;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) {
      if (alpha[row + x]! < FOREGROUND_ALPHA) continue;
      count++;
      if (x < minX) minX = x;
      if (x > maxX) maxX = x;
      if (y < minY) minY = y;
      if (y > maxY) maxY = y;
    }
  }
  const bbox =
    count === 0 ? null : { x: minX, y: minY, width: maxX - minX + 1, height: maxY - minY + 1 };
  return { bbox, coverage: count / (width * height) };
}

/** `#rrggbb` as channels. */
export function parseColour(hex: string): [number, number, number] {
  const value = Number.parseInt(hex.slice(1), 16);
  return [(value >> 16) & 255, (value >> 8) & 255, value & 255];
}

/**
 * The cut-out at the original size: the pixels with the mask as alpha, or, with a
 * background colour, composited onto it (`out = a·pixel + (1 − a)·colour`) with no alpha
 * left, which is what a shop page that cannot show transparency wants.
 */
export function cutout(
  image: RgbImage,
  alpha: Uint8Array,
  format: OutputFormat,
  background: [number, number, number] | null,
): Promise<Buffer> {
  const { width, height } = image;
  if (background) {
    const rgb = new Uint8Array(width * height * 3);
    for (let i = 0, j = 0; i < alpha.length; i++, j += 3) {
      const a = alpha[i]! / 255;
      for (let c = 0; c < 3; c++) {
        rgb[j + c] = Math.round(image.data[j + c]! * a + background[c]! * (1 - a));
      }
    }
    return encode(sharp(rgb, { raw: { width, height, channels: 3 } }), format);
  }
  const rgba = new Uint8Array(width * height * 4);
  for (let i = 0, j = 0; i < alpha.length; i++, j += 3) {
    rgba[i * 4] = image.data[j]!;
    rgba[i * 4 + 1] = image.data[j + 1]!;
    rgba[i * 4 + 2] = image.data[j + 2]!;
    rgba[i * 4 + 3] = alpha[i]!;
  }
  return encode(sharp(rgba, { raw: { width, height, channels: 4 } }), format);
}

/** The mask alone, greyscale: lossless in either format, since it is data, not a picture. */
export function maskImage(
  alpha: Uint8Array,
  width: number,
  height: number,
  format: OutputFormat,
): Promise<Buffer> {
  const image = sharp(alpha, { raw: { width, height, channels: 1 } }).toColourspace("b-w");
  return format === "webp" ? image.webp({ lossless: true }).toBuffer() : image.png().toBuffer();
}

/**
 * PNG is lossless; WebP is lossy at quality 90 (a product photo's usual trade) with its
 * alpha plane kept exact, so the cut-out's edge is the mask's.
 */
function encode(image: Sharp, format: OutputFormat): Promise<Buffer> {
  return format === "webp"
    ? image.webp({ quality: 90, alphaQuality: 100 }).toBuffer()
    : image.png().toBuffer();
}

export const CONTENT_TYPES: Record<OutputFormat, string> = {
  png: "image/png",
  webp: "image/webp",
};
