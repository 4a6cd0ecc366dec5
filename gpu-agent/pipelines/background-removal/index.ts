import type * as ort from "onnxruntime-node";
import { z } from "zod";
import { backgroundRemovalTask } from "../../../shared/tasks/background-removal.ts";
import { runStacked } from "../../batching/stack.ts";
import { stagedPipeline } from "../../batching/staged.ts";
import type { RunRequest } from "../../inference/types.ts";
import { decodeImage, type RgbImage } from "../ocr/image.ts";
import {
  imageInput,
  type LoadedPipeline,
  OutputWithArtifacts,
  type PipelineDefinition,
  taskParams,
} from "../pipeline.ts";
import { loadImageModel } from "../vision/image-model.ts";
import { maxBatchFor } from "../vision/input-shape.ts";
import { IMAGENET } from "../vision/planes.ts";
import { resizeExact } from "../vision/resize.ts";
import { cutoutPng, maskPng, maskToAlpha, resizeMask } from "./mask.ts";

const Triple = z.tuple([z.number(), z.number(), z.number()]);

/**
 * Per model: `activation` is `sigmoid` for models that output logits (RMBG-2.0, BiRefNet;
 * the default) and `none` for those that output probabilities (U²-Net, RMBG-1.4).
 */
const Options = z.strictObject({
  activation: z.enum(["sigmoid", "none"]).default("sigmoid"),
  /** Which output holds the mask; the first by default (U²-Net's d0, the fused one). */
  output: z.string().optional(),
  /** Stretch the mask to the full 0..1 range (rembg, RMBG-1.4). */
  min_max: z.boolean().default(true),
  /** ImageNet by default; RMBG-1.4 uses mean 0.5, std 1. */
  normalization: z.object({ mean: Triple, std: Triple }).optional(),
  /** The input size when the model's height and width are dynamic. */
  input_size: z.number().int().min(32).max(4096).default(1024),
});

interface Prepared {
  image: RgbImage;
  tensor: ort.Tensor;
  format: "cutout" | "mask";
}

/**
 * Background removal (RMBG-2.0, BiRefNet, U²-Net): resize to the model's input, ImageNet
 * normalisation, mask (sigmoid when the model outputs logits), min-max, back to the original
 * size, and a PNG with that mask as alpha. The PNG is an artifact: the job output says
 * `{ width, height, format, image_png: { content_type, size_bytes } }` (or `mask_png`).
 */
export const backgroundRemovalPipeline: PipelineDefinition = {
  id: backgroundRemovalTask.id,
  async load(loading): Promise<LoadedPipeline> {
    const { config, modelId = "background-removal" } = loading;
    const model = await loadImageModel(Options, { ...loading, modelId });
    const { options, session, shape, width, height } = model;
    const outputName = options.output ?? session.outputNames[0]!;
    if (!session.outputNames.includes(outputName)) {
      throw new Error(`model ${modelId}: no output named ${outputName}`);
    }
    const normalization = options.normalization ?? IMAGENET;

    const toTensor = (pixels: RgbImage) => model.toTensor(pixels.data, normalization);

    const staged = stagedPipeline<Prepared, ort.Tensor>(
      {
        async prepare(request: RunRequest) {
          const { format = "cutout" } = taskParams(backgroundRemovalTask.params, request);
          const image = await decodeImage(imageInput(request, modelId));
          const tensor = toTensor(await resizeExact(image, width, height));
          return { image, tensor, format };
        },
        async infer(items) {
          const outputs = await runStacked(
            session,
            items.map((item) => ({ [shape.name]: item.tensor })),
            [outputName],
          );
          return outputs.map((output) => output[outputName]!);
        },
        async finish(item, mask) {
          const dims = mask.dims;
          const maskHeight = dims.at(-2) ?? 0;
          const maskWidth = dims.at(-1) ?? 0;
          if (mask.type !== "float32" || maskWidth * maskHeight !== mask.size) {
            throw new Error(`unexpected mask ${mask.type} [${dims.join(", ")}]`);
          }
          const alpha = maskToAlpha(mask.data as Float32Array, options.activation, options.min_max);
          const { image } = item;
          const full = await resizeMask(alpha, { width: maskWidth, height: maskHeight }, image);
          const png =
            item.format === "mask"
              ? await maskPng(full, image.width, image.height)
              : await cutoutPng(image, full);
          const name = item.format === "mask" ? "mask_png" : "image_png";
          return new OutputWithArtifacts(
            { width: image.width, height: image.height, format: item.format },
            { [name]: { contentType: "image/png", bytes: new Uint8Array(png) } },
          );
        },
      },
      maxBatchFor(shape.dynamicBatch, config),
    );

    return {
      ...staged,
      async warm() {
        const blank = { data: new Uint8Array(width * height * 3), width, height };
        await session.run({ [shape.name]: toTensor(blank) }, [outputName]);
      },
      release: () => session.release(),
    };
  },
};
