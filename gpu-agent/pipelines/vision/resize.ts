import sharp from "sharp";
import type { RgbImage } from "./decode.ts";

const raw = (image: RgbImage) =>
  sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } });

/** Stretches to exactly `width` × `height` (bilinear), as RMBG and U²-Net preprocess. */
export async function resizeExact(
  image: RgbImage,
  width: number,
  height: number,
): Promise<RgbImage> {
  if (width === image.width && height === image.height) return image;
  const data = await raw(image)
    .resize(width, height, { fit: "fill", kernel: "linear" })
    .raw()
    .toBuffer();
  return { data, width, height };
}

/** Where the original image sits inside a letterboxed one. */
export interface Letterbox {
  /** Original pixels per letterboxed pixel is 1 / scale. */
  scale: number;
  left: number;
  top: number;
}

/**
 * Ultralytics' LetterBox: scale to fit `size` × `size` keeping the aspect ratio, then pad
 * both sides evenly with grey 114 (the `round(d ∓ 0.1)` split is theirs, so boxes map back
 * exactly as in their `scale_boxes`).
 */
export async function letterbox(
  image: RgbImage,
  width: number,
  height: number,
): Promise<{ image: RgbImage; box: Letterbox }> {
  const scale = Math.min(width / image.width, height / image.height);
  const innerWidth = Math.round(image.width * scale);
  const innerHeight = Math.round(image.height * scale);
  const padX = (width - innerWidth) / 2;
  const padY = (height - innerHeight) / 2;
  const left = Math.round(padX - 0.1);
  const top = Math.round(padY - 0.1);
  const data = await raw(image)
    .resize(innerWidth, innerHeight, { fit: "fill", kernel: "linear" })
    .extend({
      left,
      top,
      right: width - innerWidth - left,
      bottom: height - innerHeight - top,
      background: { r: 114, g: 114, b: 114 },
    })
    .raw()
    .toBuffer();
  return { image: { data, width, height }, box: { scale, left, top } };
}

/**
 * torchvision's `Resize(shorter)` then `CenterCrop(crop)`: the classic ImageNet evaluation
 * transform (256 then 224).
 */
export async function resizeAndCenterCrop(
  image: RgbImage,
  shorter: number,
  crop: { width: number; height: number },
): Promise<RgbImage> {
  const ratio = shorter / Math.min(image.width, image.height);
  const width = Math.max(crop.width, Math.floor(image.width * ratio));
  const height = Math.max(crop.height, Math.floor(image.height * ratio));
  const data = await raw(image)
    .resize(width, height, { fit: "fill", kernel: "linear" })
    .extract({
      left: Math.round((width - crop.width) / 2),
      top: Math.round((height - crop.height) / 2),
      width: crop.width,
      height: crop.height,
    })
    .raw()
    .toBuffer();
  return { data, width: crop.width, height: crop.height };
}
