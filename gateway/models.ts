import { z } from "zod";
import { InputRef } from "../shared/protocol/index.ts";

export const IMAGE_TYPES = [
  "image/png",
  "image/jpeg",
  "image/webp",
  "image/tiff",
  "image/gif",
] as const;

/**
 * The decoded-image bounds the agent enforces before inference (a small file can decode
 * to a giant image). They live in `gpu-agent/pipelines/ocr/image.ts`, which the gateway
 * cannot import (sharp); these copies are what `GET /v1/models` shows, and a test checks
 * that they match.
 */
export const MAX_IMAGE_PIXELS = 50_000_000;
export const MAX_IMAGE_SIDE = 8192;

/** What the gateway needs to know of a model to validate a job before queueing it. */
export interface ModelSpec {
  id: string;
  description: string;
  /** Whether `input.image` is required. */
  requiresImage: boolean;
  /** What an `input.image` upload may be. */
  contentTypes: readonly string[];
  /** The whole `input` object: `image` and the model's parameters. */
  input: z.ZodType<Record<string, unknown>>;
  /** Decoded-image bounds, or null for a model that does not decode images. */
  maxPixels: number | null;
  maxSide: number | null;
}

const OcrInput = z.strictObject({
  image: InputRef,
  lang: z
    .enum(["en"])
    .optional()
    .describe("Recognition language. Only English models ship; the default."),
});

/** noop echoes unknown keys back, so its input stays open to them. */
const NoopInput = z.looseObject({
  image: InputRef.optional(),
  delay_ms: z
    .number()
    .int()
    .min(0)
    .max(60_000)
    .optional()
    .describe("Wait this long before answering."),
  fail: z
    .enum(["permanent", "transient"])
    .optional()
    .describe("Fail the job this way instead (to exercise retries and dead-lettering)."),
});

export const BUILTIN_MODELS: Record<string, ModelSpec> = {
  ocr: {
    id: "ocr",
    description: "PaddleOCR PP-OCRv4 text detection and recognition. Output: {text, lines}.",
    requiresImage: true,
    contentTypes: [...IMAGE_TYPES],
    input: OcrInput,
    maxPixels: MAX_IMAGE_PIXELS,
    maxSide: MAX_IMAGE_SIDE,
  },
  noop: {
    id: "noop",
    description: "Echoes its input after `delay_ms`; measures queue overhead apart from inference.",
    requiresImage: false,
    contentTypes: [...IMAGE_TYPES],
    input: NoopInput,
    maxPixels: null,
    maxSide: null,
  },
};

const jsonSchemas = new WeakMap<ModelSpec, object>();

/** A model's `input` as JSON Schema, for `GET /v1/models` (made once per model). */
export function inputJsonSchema(spec: ModelSpec): object {
  let schema = jsonSchemas.get(spec);
  if (!schema) {
    const { $schema: _dialect, ...body } = z.toJSONSchema(spec.input, {
      io: "input",
      unrepresentable: "any",
    });
    schema = body;
    jsonSchemas.set(spec, schema);
  }
  return schema;
}

/** Every content type some served model accepts: what `POST /v1/uploads` allows. */
export function acceptedContentTypes(models: Map<string, ModelSpec>): string[] {
  return [...new Set([...models.values()].flatMap((spec) => spec.contentTypes))];
}
