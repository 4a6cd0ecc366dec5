import type * as ort from "onnxruntime-node";
import { z } from "zod";
import {
  type BackgroundRemovalFormat,
  BackgroundRemovalParams,
} from "../../../shared/tasks/background-removal.ts";
import { runStacked } from "../../batching/stack.ts";
import { stagedPipeline } from "../../batching/staged.ts";
import type { RunRequest } from "../../inference/types.ts";
import { ModelConfigError } from "../model-config.ts";
import {
  imageInput,
  type LoadedPipeline,
  OutputWithArtifacts,
  type PipelineDefinition,
  permanentFailure,
} from "../pipeline.ts";
import { type DecodedImage, decodeImage } from "../vision/decode.ts";
import {
  DegradedSizeOptions,
  type InputSize,
  inputSizeForAttempt,
} from "../vision/degraded-size.ts";
import { loadImageModel } from "../vision/image-model.ts";
import { maxBatchFor } from "../vision/input-shape.ts";
import { IMAGENET } from "../vision/planes.ts";
import { resizeExact } from "../vision/resize.ts";
import { maskToAlpha, resizeMask } from "./mask.ts";
import { CONTENT_TYPES, cutout, foreground, maskImage, parseColour } from "./output.ts";

const Triple = z.tuple([z.number(), z.number(), z.number()]);

/**
 * Per model: `activation` is `sigmoid` for models that output logits (RMBG-2.0, BiRefNet;
 * the default) and `none` for those that output probabilities (ISNet, U²-Net, RMBG-1.4).
 */
const Options = z.strictObject({
  activation: z.enum(["sigmoid", "none"]).default("sigmoid"),
  /** Which output holds the mask; the first by default (ISNet's and U²-Net's fused one). */
  output: z.string().optional(),
  /** Stretch the mask to the full 0..1 range (DIS's inference, rembg, RMBG-1.4). */
  min_max: z.boolean().default(true),
  /** ImageNet by default; ISNet and RMBG-1.4 use mean 0.5, std 1. */
  normalization: z.object({ mean: Triple, std: Triple }).optional(),
  /** The input size when the model's height and width are dynamic. */
  input_size: z.number().int().min(32).max(4096).default(1024),
  ...DegradedSizeOptions,
});

interface Prepared {
  image: DecodedImage;
  tensor: ort.Tensor;
  size: InputSize;
  params: BackgroundRemovalParams;
}

/**
 * Background removal (ISNet, RMBG, BiRefNet, U²-Net), as DIS's own inference does it: the
 * image stretched to the model's input (bilinear), normalised as the model was trained, the
 * mask (a sigmoid first when the model outputs logits) min-max stretched and resized back
 * to the original size (bilinear). Min-max commutes with the bilinear resize (both are
 * affine per pixel), so it runs on the model's 1024² rather than on the original's pixels.
 *
 * Artifacts: `mask` always, and `image` (the cut-out: the original pixels with the mask as
 * alpha, or composited onto `background`) unless `mask_only`, both in `format`. The JSON
 * output gives the foreground's bounding box and coverage and the input size used.
 */
export const backgroundRemovalPipeline: PipelineDefinition = {
  id: "background-removal",
  async load(loading): Promise<LoadedPipeline> {
    const { config, modelId = "background-removal" } = loading;
    const model = await loadImageModel(Options, { ...loading, modelId });
    const { options, session, shape, width, height } = model;
    const outputName = options.output ?? session.outputNames[0]!;
    if (!session.outputNames.includes(outputName)) {
      throw new ModelConfigError(`model ${modelId}: no output named ${outputName}`);
    }
    const normalization = options.normalization ?? IMAGENET;
    const sizeFor = inputSizeForAttempt(shape, { width, height }, options, modelId);

    const staged = stagedPipeline<Prepared, ort.Tensor>(
      {
        async prepare(request: RunRequest) {
          const parsed = BackgroundRemovalParams.safeParse(request.params);
          if (!parsed.success) {
            const problems = parsed.error.issues.map(
              (issue) => `${issue.path.join(".") || "params"}: ${issue.message}`,
            );
            throw permanentFailure("invalid_params", problems.join("; "));
          }
          const image = await decodeImage(imageInput(request, modelId));
          const size = sizeFor(request.attempt);
          const resized = await resizeExact(image, size.width, size.height);
          const tensor = model.toTensor(resized.data, normalization, size);
          return { image, tensor, size, params: parsed.data };
        },
        async infer(items) {
          // A degraded retry may share a batch with full-size jobs: one stack per size.
          const outputs = new Array<ort.Tensor>(items.length);
          const bySize = new Map<string, number[]>();
          items.forEach((item, index) => {
            const key = `${item.size.width}x${item.size.height}`;
            bySize.set(key, [...(bySize.get(key) ?? []), index]);
          });
          for (const indexes of bySize.values()) {
            const results = await runStacked(
              session,
              indexes.map((index) => ({ [shape.name]: items[index]!.tensor })),
              [outputName],
            );
            indexes.forEach((index, i) => {
              outputs[index] = results[i]![outputName]!;
            });
          }
          return outputs;
        },
        async finish(item, mask) {
          const dims = mask.dims;
          const maskHeight = dims.at(-2) ?? 0;
          const maskWidth = dims.at(-1) ?? 0;
          if (mask.type !== "float32" || maskWidth * maskHeight !== mask.size) {
            throw new Error(`unexpected mask ${mask.type} [${dims.join(", ")}]`);
          }
          const alpha = maskToAlpha(mask.data as Float32Array, options.activation, options.min_max);
          const { image, params } = item;
          const full = await resizeMask(alpha, { width: maskWidth, height: maskHeight }, image);
          return new OutputWithArtifacts(
            {
              width: image.width,
              height: image.height,
              format: params.format,
              ...foreground(full, image.width, image.height),
              input_size: item.size,
              source: { format: image.format, pages: image.pages },
            },
            await artifacts(image, full, params),
          );
        },
      },
      maxBatchFor(shape.dynamicBatch, config),
    );

    return {
      ...staged,
      async warm() {
        const blank = new Uint8Array(width * height * 3);
        await session.run({ [shape.name]: model.toTensor(blank, normalization) }, [outputName]);
      },
      release: () => session.release(),
    };
  },
};

async function artifacts(
  image: DecodedImage,
  alpha: Uint8Array,
  params: BackgroundRemovalParams,
): Promise<Record<string, { contentType: string; bytes: Uint8Array }>> {
  const format: BackgroundRemovalFormat = params.format;
  const contentType = CONTENT_TYPES[format];
  const mask = await maskImage(alpha, image.width, image.height, format);
  const made: Record<string, { contentType: string; bytes: Uint8Array }> = {
    mask: { contentType, bytes: new Uint8Array(mask) },
  };
  if (!params.mask_only) {
    const background = params.background ? parseColour(params.background) : null;
    const picture = await cutout(image, alpha, format, background);
    made.image = { contentType, bytes: new Uint8Array(picture) };
  }
  return made;
}
