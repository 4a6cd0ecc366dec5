import * as ort from "onnxruntime-node";
import type { ModelSession } from "../../inference/types.ts";
import { DB_DEFAULTS, dbBoxes, type Rect } from "./db-postprocess.ts";
import { type RgbImage, resizeRgb } from "./image.ts";
import { DETECTION_NORMALIZATION, writeBgrPlanes } from "./tensor.ts";

/** PaddleOCR's `det_limit_side_len` with `limit_type: max`: the long side is at most this. */
export const DETECTION_MAX_SIDE = 960;
/** The detector downsamples by 32, so both input sides must be multiples of it. */
const STRIDE = 32;

/** The detector's input size for an image, after PaddleOCR's DetResizeForTest. */
export function detectionSize(width: number, height: number): { width: number; height: number } {
  const ratio =
    Math.max(width, height) > DETECTION_MAX_SIDE ? DETECTION_MAX_SIDE / Math.max(width, height) : 1;
  const snap = (side: number) => Math.max(STRIDE, Math.round((side * ratio) / STRIDE) * STRIDE);
  return { width: snap(width), height: snap(height) };
}

/** The detector's input for one image: CPU work that can overlap another image's inference. */
export interface DetectionInput {
  image: RgbImage;
  tensor: ort.Tensor;
}

export async function prepareDetection(image: RgbImage): Promise<DetectionInput> {
  const size = detectionSize(image.width, image.height);
  const pixels = await resizeRgb(image, size.width, size.height);
  const input = new Float32Array(3 * size.width * size.height);
  writeBgrPlanes(input, 0, pixels, size.width, size.height, size.width, DETECTION_NORMALIZATION);
  const tensor = new ort.Tensor("float32", input, [1, 3, size.height, size.width]);
  return { image, tensor };
}

/** Text boxes in `image`, as integer pixel rectangles clipped to the image. */
export async function detectText(session: ModelSession, image: RgbImage): Promise<Rect[]> {
  return detectPrepared(session, await prepareDetection(image));
}

/** Runs the detector on a prepared input and reads the boxes out of its probability map. */
export async function detectPrepared(
  session: ModelSession,
  { image, tensor }: DetectionInput,
): Promise<Rect[]> {
  const outputs = await session.run({ [session.inputNames[0]!]: tensor });
  const map = outputs[session.outputNames[0]!];
  if (!map) throw new Error("the detection model returned no output");
  try {
    const [, , mapHeight, mapWidth] = map.dims;
    if (!mapHeight || !mapWidth || map.type !== "float32") {
      throw new Error(`unexpected detection output ${map.type} [${map.dims.join(", ")}]`);
    }
    const boxes = dbBoxes(map.data as Float32Array, mapWidth, mapHeight, DB_DEFAULTS);
    return boxes
      .map((box) => toImageRect(box, mapWidth, mapHeight, image))
      .filter((box) => box.right - box.left >= 1 && box.bottom - box.top >= 1);
  } finally {
    map.dispose();
  }
}

/** Scales a box from map to image coordinates, rounding as PaddleOCR does, then clips. */
function toImageRect(box: Rect, mapWidth: number, mapHeight: number, image: RgbImage): Rect {
  const scaleX = image.width / mapWidth;
  const scaleY = image.height / mapHeight;
  const clip = (value: number, max: number) => Math.min(max, Math.max(0, Math.round(value)));
  return {
    left: clip(box.left * scaleX, image.width),
    top: clip(box.top * scaleY, image.height),
    right: clip(box.right * scaleX, image.width),
    bottom: clip(box.bottom * scaleY, image.height),
  };
}
