import { z } from "zod";
import { JsonTensor } from "../protocol/tensor.ts";
import { defineTask } from "./task.ts";

/**
 * An output tensor as JSON: `type` is onnxruntime's element type, which may be one a job
 * cannot send (float16); 64-bit integers too large for a double are decimal strings, and
 * NaN and infinities, which JSON lacks, are null.
 */
export const JsonOutputTensor = z.object({
  dims: z.array(z.number().int().min(0)),
  type: z.string(),
  data: z.array(z.union([z.number(), z.string(), z.boolean(), z.null()])),
});
export type JsonOutputTensor = z.infer<typeof JsonOutputTensor>;

export const TensorOutput = z.object({
  outputs: z.record(z.string(), JsonOutputTensor).describe("The outputs asked for, by name."),
});
export type TensorOutput = z.infer<typeof TensorOutput>;

export const tensorTask = defineTask({
  id: "tensor",
  description: "Raw named tensors in and out, for any ONNX model.",
  image: "none",
  contentTypes: [],
  params: z.strictObject({
    inputs: z.record(z.string(), JsonTensor).describe("Feeds by input name."),
    outputs: z
      .array(z.string())
      .min(1)
      .optional()
      .describe("Only these outputs; every output when absent."),
  }),
  artifacts: [],
  output: TensorOutput,
  decodesImage: false,
  builtin: false,
  defaultTimeoutSeconds: 300,
});
