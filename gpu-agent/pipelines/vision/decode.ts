import sharp, { type Metadata } from "sharp";
import { MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE } from "../../../shared/tasks/task.ts";
import { permanentFailure } from "../pipeline.ts";

/** Decoded pixels, 3 channels (R, G, B) per pixel, row-major, no padding. */
export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
}

/** What the decoder read besides the pixels: how a job's output can say what it used. */
export interface DecodedImage extends RgbImage {
  /** sharp's name of the container: jpeg, png, webp, heif (AVIF), tiff, gif. */
  format: string;
  /** Frames of an animated GIF/WebP or pages of a multi-page TIFF; only the first is used. */
  pages: number;
}

/**
 * Images larger than this are refused before their pixels are decoded: the task catalog's
 * bounds, the ones `GET /v1/models` shows.
 */
export { MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE };

/** The formats this build decodes; HEIC (HEVC in HEIF) is refused by name below. */
const DECODED = new Set(["jpeg", "png", "webp", "heif", "tiff", "gif"]);

/**
 * Decodes an uploaded image the way the vision models expect to see it: EXIF orientation
 * applied (a phone's portrait JPEG stands up), CMYK and greyscale converted to sRGB (through
 * the embedded ICC profile when there is one), 16-bit samples reduced to 8, transparency
 * flattened onto `background` (white by default), and only the first frame of an animated
 * GIF or WebP or the first page of a multi-page TIFF: a product photo is one picture, and
 * running every frame would multiply a job's cost by a number the client never chose.
 * Anything sharp cannot decode, including a truncated file, is the client's problem, so it
 * fails permanently (`invalid_image`) and is never retried.
 */
export async function decodeImage(
  bytes: Uint8Array,
  background = "#ffffff",
): Promise<DecodedImage> {
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
      // The first frame or page, on purpose (see above); sharp's default too, said aloud.
      page: 0,
      pages: 1,
    })
      .rotate()
      .flatten({ background })
      // sRGB at 8 bits a sample: CMYK, Lab and 16-bit inputs all arrive as the model's RGB.
      .toColourspace("srgb")
      .removeAlpha()
      .raw({ depth: "uchar" })
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) {
      throw new Error(`decoded to ${info.channels} channels, expected 3`);
    }
    return {
      data,
      width: info.width,
      height: info.height,
      format: metadata.format ?? "unknown",
      pages: metadata.pages ?? 1,
    };
  } catch (error) {
    throw permanentFailure("invalid_image", `the image could not be decoded: ${describe(error)}`);
  }
}

async function readMetadata(bytes: Uint8Array): Promise<Metadata> {
  if (bytes.length === 0) {
    throw permanentFailure("invalid_image", "the image file is empty");
  }
  let metadata: Metadata;
  try {
    // Reads the header only, so a forged 100000x100000 header costs nothing.
    metadata = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch (error) {
    throw permanentFailure(
      "invalid_image",
      `the file is not an image in a supported format (JPEG, PNG, WebP, AVIF, TIFF, GIF): ${describe(error)}`,
    );
  }
  // libheif here decodes AV1 (AVIF) only; HEVC (the iPhone's HEIC) needs a codec this
  // build of sharp does not carry, so say that instead of a decoder error.
  if (metadata.format === "heif" && metadata.compression === "hevc") {
    throw permanentFailure(
      "invalid_image",
      "HEIC (HEVC-coded HEIF) images are not decoded by this agent's build; send JPEG, PNG, WebP or AVIF",
    );
  }
  if (!metadata.format || !DECODED.has(metadata.format)) {
    throw permanentFailure(
      "invalid_image",
      `${metadata.format ?? "this"} images are not accepted; send JPEG, PNG, WebP, AVIF, TIFF or GIF`,
    );
  }
  return metadata;
}

/**
 * sharp appends libvips's error buffer to its message, and that buffer is per thread and
 * may still hold other images' errors: keep sharp's own words only, so a tenant never
 * sees another job's error and the message is the same on every thread.
 */
function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const first = message.split("\n")[0] ?? message;
  return first.replace(/:\s*(Vips.*)?$/, "").trim();
}
