import * as ort from "onnxruntime-node";
import type { ModelSession } from "../../inference/types.ts";
import { ctcGreedyDecode, type DecodedText } from "./ctc.ts";
import { type RgbImage, resizeRgb } from "./image.ts";
import { RECOGNITION_NORMALIZATION, writeBgrPlanes } from "./tensor.ts";

/** PP-OCRv4's recognition input height. */
export const RECOGNITION_HEIGHT = 48;
/** PaddleOCR's `rec_image_shape` width: crops are padded to at least this. */
const MIN_WIDTH = 320;
/**
 * Long lines keep their aspect ratio up to this width (about 33 character heights); past it
 * they are squeezed, which costs accuracy but bounds the tensor a line can produce.
 */
const MAX_WIDTH = 1600;
/** PaddleOCR's `rec_batch_num`: crops of similar shape run together. */
const BATCH_SIZE = 6;

/**
 * Reads the text in each crop. Crops are batched by aspect ratio, as PaddleOCR does, so that
 * short crops are not padded out to the width of the longest line.
 */
export async function recognizeLines(
  session: ModelSession,
  crops: readonly RgbImage[],
  charset: readonly string[],
  /** Told after each batch how many crops are read, of how many. */
  onRead?: (done: number, total: number) => void,
): Promise<DecodedText[]> {
  const order = crops.map((_, index) => index);
  order.sort((a, b) => aspect(crops[a]!) - aspect(crops[b]!));
  const results: DecodedText[] = new Array(crops.length);
  for (let start = 0; start < order.length; start += BATCH_SIZE) {
    const batch = order.slice(start, start + BATCH_SIZE);
    const decoded = await recognizeBatch(
      session,
      batch.map((index) => crops[index]!),
      charset,
    );
    batch.forEach((index, i) => {
      results[index] = decoded[i]!;
    });
    onRead?.(start + batch.length, crops.length);
  }
  return results;
}

function aspect(image: RgbImage): number {
  return image.width / image.height;
}

function scaledWidth(image: RgbImage): number {
  return Math.min(MAX_WIDTH, Math.max(1, Math.ceil(RECOGNITION_HEIGHT * aspect(image))));
}

async function recognizeBatch(
  session: ModelSession,
  crops: readonly RgbImage[],
  charset: readonly string[],
): Promise<DecodedText[]> {
  const widths = crops.map(scaledWidth);
  const tensorWidth = Math.max(MIN_WIDTH, ...widths);
  const imageSize = 3 * RECOGNITION_HEIGHT * tensorWidth;
  // Zero after normalisation is mid-grey: PaddleOCR pads normalised tensors with 0.
  const input = new Float32Array(crops.length * imageSize);
  for (const [i, crop] of crops.entries()) {
    const width = widths[i]!;
    const pixels = await resizeRgb(crop, width, RECOGNITION_HEIGHT, "cubic");
    writeBgrPlanes(
      input,
      i * imageSize,
      pixels,
      width,
      RECOGNITION_HEIGHT,
      tensorWidth,
      RECOGNITION_NORMALIZATION,
    );
  }
  const shape = [crops.length, 3, RECOGNITION_HEIGHT, tensorWidth];
  const outputs = await session.run({
    [session.inputNames[0]!]: new ort.Tensor("float32", input, shape),
  });
  const output = outputs[session.outputNames[0]!];
  if (!output) throw new Error("the recognition model returned no output");
  try {
    const [batch, steps, classes] = output.dims;
    if (batch !== crops.length || !steps || !classes || output.type !== "float32") {
      throw new Error(`unexpected recognition output ${output.type} [${output.dims.join(", ")}]`);
    }
    if (classes !== charset.length) {
      throw new Error(`the model has ${classes} classes but the dictionary ${charset.length}`);
    }
    const data = output.data as Float32Array;
    return crops.map((_, i) => ctcGreedyDecode(data, steps, classes, charset, i * steps * classes));
  } finally {
    output.dispose();
  }
}
