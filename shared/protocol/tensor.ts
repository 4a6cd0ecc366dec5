import { z } from "zod";

/** Tensor element types that travel as JSON (the `tensor` model's inputs and outputs). */
export const TENSOR_TYPES = [
  "float32",
  "float64",
  "int8",
  "uint8",
  "int16",
  "uint16",
  "int32",
  "uint32",
  "int64",
  "uint64",
  "bool",
  "string",
] as const;
export type JsonTensorType = (typeof TENSOR_TYPES)[number];

/** Largest tensor a job may send or receive as JSON. */
export const MAX_JSON_ELEMENTS = 16 * 1024 * 1024;

/** A tensor as JSON: `dims`, element `type` and row-major `data` (int64 may be strings). */
export const JsonTensor = z.strictObject({
  dims: z.array(z.number().int().min(0)).max(16),
  type: z.enum(TENSOR_TYPES),
  data: z.array(z.union([z.number(), z.string(), z.boolean()])).max(MAX_JSON_ELEMENTS),
});
export type JsonTensor = z.infer<typeof JsonTensor>;
