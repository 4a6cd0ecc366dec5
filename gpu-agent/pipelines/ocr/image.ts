import sharp, { type Metadata } from "sharp";
import { permanentFailure } from "../pipeline.ts";

/** Decoded pixels, 3 channels (R, G, B) per pixel, row-major, no padding. */
export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
}

/** Images larger than this are refused before their pixels are decoded. */
export const MAX_IMAGE_PIXELS = 50_000_000;
export const MAX_IMAGE_SIDE = 8192;

/**
 * Decodes an uploaded image the way PaddleOCR expects to see it: EXIF orientation applied,
 * transparency flattened onto white (text on a transparent PNG is usually dark), sRGB.
 * Anything sharp cannot decode is the client's problem, so it fails permanently.
 */
export async function decodeImage(bytes: Uint8Array): Promise<RgbImage> {
  const metadata = await readMetadata(bytes);
  const { width, height } = metadata;
  if (!width || !height) {
    throw permanentFailure("invalid_image", "the image has no readable dimensions");
  }
  // EXIF orientations 5-8 swap the sides, which does not change either bound.
  if (width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE || width * height > MAX_IMAGE_PIXELS) {
    throw permanentFailure(
      "image_too_large",
      `the image is ${width}x${height}; the limit is ${MAX_IMAGE_SIDE} px a side and ` +
        `${MAX_IMAGE_PIXELS / 1_000_000} megapixels`,
    );
  }
  try {
    const { data, info } = await sharp(bytes, {
      limitInputPixels: MAX_IMAGE_PIXELS,
      // Truncated or damaged files would otherwise decode to partly grey pixels.
      failOn: "warning",
    })
      .rotate()
      .flatten({ background: "#ffffff" })
      .toColourspace("srgb")
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) {
      throw new Error(`decoded to ${info.channels} channels, expected 3`);
    }
    return { data, width: info.width, height: info.height };
  } catch (error) {
    throw permanentFailure("invalid_image", `the image could not be decoded: ${describe(error)}`);
  }
}

async function readMetadata(bytes: Uint8Array): Promise<Metadata> {
  if (bytes.length === 0) {
    throw permanentFailure("invalid_image", "the image file is empty");
  }
  try {
    // Reads the header only, so a forged 100000x100000 header costs nothing.
    return await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch (error) {
    throw permanentFailure(
      "invalid_image",
      `the file is not an image in a supported format (JPEG, PNG, WebP, GIF, TIFF, AVIF): ${describe(error)}`,
    );
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Resizes RGB pixels. Detection input uses bilinear, as PaddleOCR's cv2.resize does by
 * default; recognition crops read better bicubic (PaddleOCR cuts them with INTER_CUBIC).
 */
export async function resizeRgb(
  image: RgbImage,
  width: number,
  height: number,
  kernel: "linear" | "cubic" = "linear",
): Promise<Uint8Array> {
  if (width === image.width && height === image.height) return image.data;
  return sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } })
    .resize(width, height, { fit: "fill", kernel })
    .raw()
    .toBuffer();
}

/** Cuts a rectangle out of `image` (integer pixel bounds, already clipped to the image). */
export function cropRgb(
  image: RgbImage,
  left: number,
  top: number,
  width: number,
  height: number,
): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let row = 0; row < height; row++) {
    const start = ((top + row) * image.width + left) * 3;
    data.set(image.data.subarray(start, start + width * 3), row * width * 3);
  }
  return { data, width, height };
}

/** Rotates 90° counter-clockwise (numpy's rot90), how PaddleOCR stands up tall crops. */
export function rotateCounterClockwise(image: RgbImage): RgbImage {
  const { width, height } = image;
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      // Source (x, y) lands at column y, row (width - 1 - x) of a height-wide image.
      const from = (y * width + x) * 3;
      const to = ((width - 1 - x) * height + y) * 3;
      data[to] = image.data[from]!;
      data[to + 1] = image.data[from + 1]!;
      data[to + 2] = image.data[from + 2]!;
    }
  }
  return { data, width: height, height: width };
}
