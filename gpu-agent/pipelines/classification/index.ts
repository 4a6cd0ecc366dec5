import * as ort from "onnxruntime-node";
import sharp from "sharp";
import { z } from "zod";
import {
  type ClassificationOutput,
  classificationTask,
} from "../../../shared/tasks/classification.ts";
import { runStacked } from "../../batching/stack.ts";
import { stagedPipeline } from "../../batching/staged.ts";
import type { RunRequest } from "../../inference/types.ts";
import { ModelConfigError } from "../model-config.ts";
import { decodeImage } from "../ocr/image.ts";
import {
  imageInput,
  type LoadedPipeline,
  type PipelineDefinition,
  taskParams,
} from "../pipeline.ts";
import { loadImageModel } from "../vision/image-model.ts";
import { maxBatchFor } from "../vision/input-shape.ts";
import { IMAGENET } from "../vision/planes.ts";
import { PreparePool } from "../vision/prepare-pool.ts";
import { resizeAndCenterCrop } from "../vision/resize.ts";

const Triple = z.tuple([z.number(), z.number(), z.number()]);

const Options = z.strictObject({
  /** Class names in the model's order; `class_<i>` when absent. */
  labels: z.array(z.string()).min(1).optional(),
  /** `softmax` for models that output logits (most); `none` when they output probabilities. */
  activation: z.enum(["softmax", "none"]).default("softmax"),
  /** The shorter side before the centre crop; the crop / 0.875 (256 for 224) by default. */
  resize: z.number().int().min(8).max(8192).optional(),
  /** The crop size when the model's height and width are dynamic. */
  input_size: z.number().int().min(8).max(4096).default(224),
  normalization: z.object({ mean: Triple, std: Triple }).optional(),
  top_k: z.number().int().min(1).max(1000).default(5),
  /**
   * Worker threads that decode, resize and normalise images (0: the runner child's main
   * thread does it). For a fast model on a big GPU, where preparing a batch on one thread
   * takes longer than running it.
   */
  prepare_threads: z.number().int().min(0).max(64).default(0),
});

export type { ClassificationOutput };

interface Prepared {
  tensor: ort.Tensor;
  topK: number | undefined;
  /** The tensor came from the prepare pool: its buffer goes back to it after the batch. */
  pooled: boolean;
}

/**
 * Image classification (ResNet, EfficientNet, ViT exports): the ImageNet evaluation
 * transform (shorter side to 256, centre crop 224, ImageNet normalisation), softmax, top-k
 * with labels.
 */
export const classificationPipeline: PipelineDefinition = {
  id: classificationTask.id,
  async load(loading): Promise<LoadedPipeline> {
    const { config, modelId = "classification" } = loading;
    const model = await loadImageModel(Options, { ...loading, modelId });
    const { options, session, shape } = model;
    const crop = { width: model.width, height: model.height };
    const shorter = options.resize ?? Math.round(Math.max(crop.width, crop.height) / 0.875);
    const normalization = options.normalization ?? IMAGENET;
    const outputName = session.outputNames[0]!;
    const head = session.outputMetadata[0];
    const declared = head?.isTensor ? head.shape.at(-1) : undefined;
    // One score per class per image: a detector's [N, 4 + classes, anchors] would fail every job.
    const between = head?.isTensor ? head.shape.slice(1, -1) : [];
    const wide = between.some((dim) => typeof dim === "number" && dim !== 1);
    if (head?.isTensor && (head.shape.length < 2 || wide)) {
      throw new ModelConfigError(
        `model ${modelId}: expected logits [N, classes] as its first output, got ${head.type} [${head.shape.join(", ")}]`,
      );
    }
    if (options.labels && typeof declared === "number" && declared !== options.labels.length) {
      throw new ModelConfigError(
        `model ${modelId} has ${declared} classes but ${options.labels.length} labels`,
      );
    }

    const toTensor = (pixels: Uint8Array) => model.toTensor(pixels, normalization);
    const pool = options.prepare_threads > 0 ? new PreparePool(options.prepare_threads) : null;
    const prepareImage = async (bytes: Uint8Array): Promise<Omit<Prepared, "topK">> => {
      if (pool && !pool.broken) {
        const data = await pool.centerCrop(bytes, shorter, crop, normalization);
        return {
          tensor: new ort.Tensor("float32", data, [1, 3, crop.height, crop.width]),
          pooled: true,
        };
      }
      const cropped = await resizeAndCenterCrop(await decodeImage(bytes), shorter, crop);
      return { tensor: toTensor(cropped.data), pooled: false };
    };

    const staged = stagedPipeline<Prepared, ort.Tensor>(
      {
        async prepare(request: RunRequest) {
          const { top_k: topK } = taskParams(classificationTask.params, request);
          return { ...(await prepareImage(imageInput(request, modelId))), topK };
        },
        release(item) {
          if (item.pooled) pool?.recycle(item.tensor.data as Float32Array);
        },
        async infer(items) {
          const outputs = await runStacked(
            session,
            items.map((item) => ({ [shape.name]: item.tensor })),
            [outputName],
          );
          return outputs.map((output) => output[outputName]!);
        },
        finish(item, logits): ClassificationOutput {
          const classes = logits.dims.at(-1) ?? 0;
          if (logits.type !== "float32" || classes === 0 || logits.size !== classes) {
            throw new Error(
              `unexpected classifier output ${logits.type} [${logits.dims.join(", ")}]`,
            );
          }
          if (options.labels && options.labels.length !== classes) {
            throw new Error(
              `model ${modelId} has ${classes} classes but ${options.labels.length} labels`,
            );
          }
          const scores =
            options.activation === "softmax"
              ? softmax(logits.data as Float32Array)
              : (logits.data as Float32Array);
          const order = topClasses(scores, Math.min(classes, item.topK ?? options.top_k));
          return {
            predictions: order.map((id) => ({
              label: options.labels?.[id] ?? `class_${id}`,
              class_id: id,
              score: scores[id]!,
            })),
          };
        },
      },
      maxBatchFor(shape.dynamicBatch, config),
    );

    return {
      ...staged,
      async warm() {
        const grey = new Uint8Array(crop.width * crop.height * 3).fill(128);
        await session.run({ [shape.name]: toTensor(grey) }, [outputName]);
        if (pool) {
          // Each thread loads its decoder now, not on the first job.
          const png = await sharp({
            create: { width: 8, height: 8, channels: 3, background: "#808080" },
          })
            .png()
            .toBuffer();
          const each = Array.from({ length: options.prepare_threads }, () =>
            pool.centerCrop(new Uint8Array(png), shorter, crop, normalization),
          );
          await Promise.all(each);
        }
      },
      async release() {
        await pool?.close();
        await session.release();
      },
    };
  },
};

/** Softmax with the maximum subtracted first, so large logits do not overflow. */
export function softmax(logits: ArrayLike<number>): Float32Array {
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i]!);
  const out = new Float32Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) {
    out[i] = Math.exp(logits[i]! - max);
    sum += out[i]!;
  }
  for (let i = 0; i < out.length; i++) out[i] = out[i]! / sum;
  return out;
}

/**
 * The `k` highest scores' indexes, best first (ties: the lower index first, as a stable sort
 * would have it). One pass keeping a sorted list of `k`, instead of sorting every class:
 * top-5 of 1000 classes runs on every job.
 */
export function topClasses(scores: ArrayLike<number>, k: number): number[] {
  const top: number[] = [];
  for (let i = 0; i < scores.length; i++) {
    const score = scores[i]!;
    if (top.length === k && score <= scores[top[k - 1]!]!) continue;
    let at = top.length;
    while (at > 0 && scores[top[at - 1]!]! < score) at--;
    top.splice(at, 0, i);
    if (top.length > k) top.pop();
  }
  return top;
}
