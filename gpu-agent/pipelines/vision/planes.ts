/**
 * Per-channel normalisation `(x / 255 - mean) / std`, channels in the tensor's plane order
 * (R, G, B here; B, G, R for PaddleOCR's models, see `ocr/tensor.ts`).
 */
export interface Normalization {
  mean: readonly [number, number, number];
  std: readonly [number, number, number];
}

/** torchvision's ImageNet statistics, which RMBG-2.0, BiRefNet, U²-Net and ResNets expect. */
export const IMAGENET: Normalization = {
  mean: [0.485, 0.456, 0.406],
  std: [0.229, 0.224, 0.225],
};

/** Pixels scaled to [0, 1] and nothing else: the YOLO convention. */
export const UNIT_SCALE: Normalization = { mean: [0, 0, 0], std: [1, 1, 1] };

/**
 * Writes interleaved RGB pixels into one planar float32 CHW image at `offset` (R, G, B
 * planes). Models trained with PIL or torchvision read RGB, unlike PaddleOCR's BGR.
 */
export function writeRgbPlanes(
  target: Float32Array,
  offset: number,
  rgb: Uint8Array,
  width: number,
  height: number,
  { mean, std }: Normalization,
): void {
  const plane = width * height;
  for (let channel = 0; channel < 3; channel++) {
    const scale = 1 / (255 * std[channel]!);
    const shift = mean[channel]! / std[channel]!;
    const planeStart = offset + channel * plane;
    for (let i = 0; i < plane; i++) {
      target[planeStart + i] = rgb[i * 3 + channel]! * scale - shift;
    }
  }
}
