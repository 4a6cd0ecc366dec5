import sharp from "sharp";

export type MaskActivation = "sigmoid" | "none";

/**
 * Turns the model's mask (logits or probabilities, at the model's size) into 8-bit alpha:
 * sigmoid for models that output logits (RMBG-2.0, BiRefNet), then min-max normalisation as
 * rembg and RMBG-1.4 do, so the most certain foreground is opaque. A flat mask has no range
 * to stretch and is kept as it is.
 */
export function maskToAlpha(
  values: ArrayLike<number>,
  activation: MaskActivation,
  minMax: boolean,
): Uint8Array {
  const probabilities = new Float32Array(values.length);
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < values.length; i++) {
    const value = activation === "sigmoid" ? 1 / (1 + Math.exp(-values[i]!)) : values[i]!;
    probabilities[i] = value;
    if (value < min) min = value;
    if (value > max) max = value;
  }
  const stretch = minMax && max - min > 1e-6;
  const alpha = new Uint8Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const p = stretch ? (probabilities[i]! - min) / (max - min) : probabilities[i]!;
    alpha[i] = Math.round(Math.min(1, Math.max(0, p)) * 255);
  }
  return alpha;
}

/** Resizes a one-channel mask to the original image size (bilinear, as rembg's PIL resize). */
export async function resizeMask(
  alpha: Uint8Array,
  from: { width: number; height: number },
  to: { width: number; height: number },
): Promise<Uint8Array> {
  if (from.width === to.width && from.height === to.height) return alpha;
  return (
    sharp(alpha, { raw: { width: from.width, height: from.height, channels: 1 } })
      .resize(to.width, to.height, { fit: "fill", kernel: "linear" })
      // sharp widens one channel to sRGB on output unless told otherwise.
      .toColourspace("b-w")
      .raw()
      .toBuffer()
  );
}
