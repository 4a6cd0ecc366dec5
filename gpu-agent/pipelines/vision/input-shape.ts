import type { ModelSession } from "../../inference/types.ts";
import { DEFAULT_MAX_BATCH, type ModelConfig, ModelConfigError } from "../model-config.ts";

/** An NCHW image input as the model declares it. */
export interface ImageInputShape {
  name: string;
  /** Null when the axis is symbolic (dynamic): the pipeline picks the size. */
  height: number | null;
  width: number | null;
  /** True when the batch axis is symbolic, so several images can run at once. */
  dynamicBatch: boolean;
}

const fixed = (dim: number | string | undefined): number | null =>
  typeof dim === "number" && dim > 0 ? dim : null;

/**
 * Reads the first input's shape from the model, so a 320×320 U²-Net and a 1024×1024
 * RMBG-2.0 need no size in their config. Anything but float32 `[N, 3, H, W]` is refused at
 * load time, where the operator sees it, instead of failing every job.
 */
export function imageInputShape(session: ModelSession, modelId: string): ImageInputShape {
  const input = session.inputMetadata[0];
  if (!input?.isTensor) {
    throw new ModelConfigError(`model ${modelId}: the first input is not a tensor`);
  }
  const shape = input.shape;
  const channels = shape[1];
  if (input.type !== "float32" || shape.length !== 4 || (fixed(channels) ?? 3) !== 3) {
    throw new ModelConfigError(
      `model ${modelId}: expected a float32 [N, 3, H, W] image input, got ${input.type} [${shape.join(", ")}]`,
    );
  }
  return {
    name: input.name,
    height: fixed(shape[2]),
    width: fixed(shape[3]),
    dynamicBatch: fixed(shape[0]) === null,
  };
}

/**
 * The batch a model runs at most: its config's `max_batch` (default 8) when the batch axis is
 * dynamic, else 1: a model exported with batch 1 rejects a larger tensor.
 */
export function maxBatchFor(dynamicBatch: boolean, config: ModelConfig | undefined): number {
  return dynamicBatch ? (config?.max_batch ?? DEFAULT_MAX_BATCH) : 1;
}
