import { z } from "zod";

export const IMAGE_TYPES = [
  "image/png",
  "image/jpeg",
  "image/webp",
  "image/tiff",
  "image/gif",
] as const;

/** What the gateway needs to know of a model to validate a job before queueing it. */
export const ModelSpec = z.object({
  id: z.string(),
  description: z.string(),
  /** Whether `input.image` is required. */
  requiresImage: z.boolean(),
  contentTypes: z.array(z.string()),
});
export type ModelSpec = z.infer<typeof ModelSpec>;

export const BUILTIN_MODELS: Record<string, ModelSpec> = {
  ocr: {
    id: "ocr",
    description: "PaddleOCR PP-OCRv4 text detection and recognition. Output: {text, lines}.",
    requiresImage: true,
    contentTypes: [...IMAGE_TYPES],
  },
  noop: {
    id: "noop",
    description: "Echoes its input after `delay_ms`; measures queue overhead apart from inference.",
    requiresImage: false,
    contentTypes: [...IMAGE_TYPES],
  },
};
