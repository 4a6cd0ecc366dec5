import * as ort from "onnxruntime-node";
import type { z } from "zod";
import type { ModelSession } from "../../inference/types.ts";
import { pipelineOptions, requireModelFile } from "../model-config.ts";
import type { PipelineLoadOptions } from "../pipeline.ts";
import { type ImageInputShape, imageInputShape } from "./input-shape.ts";
import { type Normalization, writeRgbPlanes } from "./planes.ts";

/** What every image pipeline loads alike: its options, the session and the input's size. */
export interface ImageModel<Options> {
  options: Options;
  session: ModelSession;
  shape: ImageInputShape;
  /** The input size: the model's own, or `input_size` where its axes are dynamic. */
  width: number;
  height: number;
  /**
   * Interleaved RGB pixels at the input size (or `size`, for a model whose axes are
   * dynamic) as a `[1, 3, height, width]` float32 tensor.
   */
  toTensor(
    pixels: Uint8Array,
    normalization: Normalization,
    size?: { width: number; height: number },
  ): ort.Tensor;
}

/**
 * Parses the pipeline's options (its schema has an `input_size`), opens the model's file and
 * reads its image input, refusing at load time what the pipeline could not feed.
 */
export async function loadImageModel<Schema extends z.ZodType<{ input_size: number }>>(
  schema: Schema,
  { createSession, config, modelId }: PipelineLoadOptions & { modelId: string },
): Promise<ImageModel<z.infer<Schema>>> {
  const options = pipelineOptions(schema, modelId, config);
  const session = await createSession(requireModelFile(modelId, config));
  const shape = imageInputShape(session, modelId);
  const width = shape.width ?? options.input_size;
  const height = shape.height ?? options.input_size;
  return {
    options,
    session,
    shape,
    width,
    height,
    toTensor(pixels, normalization, size = { width, height }) {
      const data = new Float32Array(3 * size.width * size.height);
      writeRgbPlanes(data, 0, pixels, size.width, size.height, normalization);
      return new ort.Tensor("float32", data, [1, 3, size.height, size.width]);
    },
  };
}
