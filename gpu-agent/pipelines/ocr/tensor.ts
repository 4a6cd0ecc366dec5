import { IMAGENET, type Normalization } from "../vision/planes.ts";

/**
 * PaddleOCR's detection normalisation: ImageNet's statistics, applied to its B, G, R planes
 * in that order (as its training did).
 */
export const DETECTION_NORMALIZATION: Normalization = IMAGENET;

/** PaddleOCR's recognition normalisation: pixels to [-1, 1]. */
export const RECOGNITION_NORMALIZATION: Normalization = {
  mean: [0.5, 0.5, 0.5],
  std: [0.5, 0.5, 0.5],
};

/**
 * Writes RGB pixels into a planar float32 buffer (one CHW image) starting at `offset`,
 * `tensorWidth` wide so that a narrower image leaves the rest of each row as it is (zero).
 *
 * PaddleOCR reads images with OpenCV, so its models were trained on B, G, R planes with the
 * statistics above applied in that order; feeding R, G, B would shift every colour.
 */
export function writeBgrPlanes(
  target: Float32Array,
  offset: number,
  rgb: Uint8Array,
  width: number,
  height: number,
  tensorWidth: number,
  { mean, std }: Normalization,
): void {
  const plane = tensorWidth * height;
  for (let channel = 0; channel < 3; channel++) {
    const source = 2 - channel; // B from R, G from G, R from B
    const scale = 1 / (255 * std[channel]!);
    const shift = mean[channel]! / std[channel]!;
    const planeStart = offset + channel * plane;
    for (let y = 0; y < height; y++) {
      const rowIn = y * width * 3 + source;
      const rowOut = planeStart + y * tensorWidth;
      for (let x = 0; x < width; x++) {
        target[rowOut + x] = rgb[rowIn + x * 3]! * scale - shift;
      }
    }
  }
}
