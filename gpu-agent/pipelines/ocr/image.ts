import sharp from "sharp";
import type { RgbImage } from "../vision/decode.ts";

// The decoder is every vision pipeline's (formats, orientation, colour, frames); OCR reads
// what it makes, and these names stay importable from here.
export {
  decodeImage,
  MAX_IMAGE_PIXELS,
  MAX_IMAGE_SIDE,
  type RgbImage,
} from "../vision/decode.ts";

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
