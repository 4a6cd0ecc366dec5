import { z } from "zod";
import { ModelConfigError } from "../model-config.ts";
import type { ImageInputShape } from "./input-shape.ts";

/**
 * A lower input resolution for a job's later attempts: a job that failed twice at full size
 * (out of memory, a timeout on a loaded box) gets its third attempt at, say, 768² instead of
 * 1024², which costs about half the compute and memory. Only for models whose height and
 * width axes are dynamic: a graph exported at a fixed size (ISNet's 1024²) rejects any
 * other, so asking for it there fails at load time, where the operator sees it.
 */
export const DegradedSizeOptions = {
  degraded_input_size: z.number().int().min(32).max(4096).optional(),
  /** The first attempt that runs at the degraded size: 3 is "the second retry". */
  degraded_from_attempt: z.number().int().min(2).max(100).default(3),
};

export interface InputSize {
  width: number;
  height: number;
}

/** Picks the input size for one attempt; built once per model at load time. */
export function inputSizeForAttempt(
  shape: ImageInputShape,
  full: InputSize,
  options: { degraded_input_size?: number | undefined; degraded_from_attempt: number },
  modelId: string,
): (attempt: number | undefined) => InputSize {
  const degraded = options.degraded_input_size;
  if (degraded === undefined) return () => full;
  if (shape.width !== null || shape.height !== null) {
    throw new ModelConfigError(
      `model ${modelId}: degraded_input_size needs dynamic height and width axes; the graph's input is fixed at ${shape.width ?? "?"}x${shape.height ?? "?"}`,
    );
  }
  const small = { width: degraded, height: degraded };
  return (attempt) => ((attempt ?? 1) >= options.degraded_from_attempt ? small : full);
}
