import { z } from "zod";
import { InputRef } from "../shared/protocol/index.ts";
import { JsonTensor } from "../shared/protocol/tensor.ts";

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

/**
 * The pipelines an agent runs (its models.yaml `task`). A copy of the agent's list: the
 * gateway core cannot import the agent, and a model's task decides its input and artifacts.
 */
export const MODEL_TASKS = [
  "ocr",
  "background-removal",
  "detection",
  "classification",
  "tensor",
  "noop",
] as const;
export const ModelTask = z.enum(MODEL_TASKS);
export type ModelTask = z.infer<typeof ModelTask>;

/** A binary file a model's runs may make beside the JSON output, under this output key. */
export interface ArtifactSpec {
  name: string;
  content_type: string;
  max_bytes: number;
}

/** What the gateway needs to know of a model to validate a job before queueing it. */
export interface ModelSpec {
  id: string;
  task: ModelTask;
  description: string;
  /**
   * The artifacts a run may make: the claim carries an upload URL for each, and
   * `GET /v1/jobs/{id}/artifacts/{name}` serves them back.
   */
  artifacts?: readonly ArtifactSpec[];
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
    task: "ocr",
    description: "PaddleOCR PP-OCRv4 text detection and recognition. Output: {text, lines}.",
    requiresImage: true,
    contentTypes: [...IMAGE_TYPES],
    input: OcrInput,
    maxPixels: MAX_IMAGE_PIXELS,
    maxSide: MAX_IMAGE_SIDE,
  },
  noop: {
    id: "noop",
    task: "noop",
    description: "Echoes its input after `delay_ms`; measures queue overhead apart from inference.",
    requiresImage: false,
    contentTypes: [...IMAGE_TYPES],
    input: NoopInput,
    maxPixels: null,
    maxSide: null,
  },
};

/** PNG cutouts and masks at the original size: 8192² RGBA compresses well below this. */
const MAX_PNG_ARTIFACT_BYTES = 256 * 1024 * 1024;

const Threshold = z.number().min(0).max(1);

/** An image model's spec; the id is the configured model's. */
const imageModel = (
  task: ModelTask,
  description: string,
  input: z.ZodType<Record<string, unknown>>,
  artifacts?: readonly ArtifactSpec[],
): ModelSpec => ({
  id: task,
  task,
  description,
  requiresImage: true,
  contentTypes: [...IMAGE_TYPES],
  input,
  maxPixels: MAX_IMAGE_PIXELS,
  maxSide: MAX_IMAGE_SIDE,
  ...(artifacts ? { artifacts } : {}),
});

/**
 * What a model of each task takes, matching the parameters its agent pipeline reads
 * (`gpu-agent/pipelines/<task>`). Models that models.yaml names get their task's spec.
 */
export const TASK_SPECS: Record<ModelTask, ModelSpec> = {
  ocr: BUILTIN_MODELS.ocr!,
  noop: BUILTIN_MODELS.noop!,
  "background-removal": imageModel(
    "background-removal",
    "Background removal (RMBG-2.0, BiRefNet, U²-Net). Output: {width, height, format} and " +
      "the PNG as artifact `image_png` (cutout with alpha) or `mask_png` (the mask alone).",
    z.strictObject({
      image: InputRef,
      format: z
        .enum(["cutout", "mask"])
        .optional()
        .describe("`cutout` (default): the image with the mask as alpha; `mask`: the mask alone."),
    }),
    [
      { name: "image_png", content_type: "image/png", max_bytes: MAX_PNG_ARTIFACT_BYTES },
      { name: "mask_png", content_type: "image/png", max_bytes: MAX_PNG_ARTIFACT_BYTES },
    ],
  ),
  detection: imageModel(
    "detection",
    "Object detection (YOLOv8/YOLO11). Output: {width, height, detections: [{label, class_id, score, box}]}.",
    z.strictObject({
      image: InputRef,
      confidence: Threshold.optional().describe("Lowest score kept; the model's default (0.25)."),
      iou: Threshold.optional().describe("NMS IoU threshold; the model's default (0.45)."),
      max_detections: z.number().int().min(1).max(10_000).optional(),
    }),
  ),
  classification: imageModel(
    "classification",
    "Image classification (ImageNet-style). Output: {predictions: [{label, class_id, score}]}, top-k.",
    z.strictObject({
      image: InputRef,
      top_k: z.number().int().min(1).max(1000).optional(),
    }),
  ),
  tensor: {
    id: "tensor",
    task: "tensor",
    description: "Raw named tensors in and out, for any ONNX model.",
    requiresImage: false,
    contentTypes: [],
    input: z.strictObject({
      inputs: z.record(z.string(), JsonTensor).describe("Feeds by input name."),
      outputs: z
        .array(z.string())
        .min(1)
        .optional()
        .describe("Only these outputs; every output when absent."),
    }),
    maxPixels: null,
    maxSide: null,
  },
};

/** The spec of a configured model: its task's, under its own id. */
export function specForTask(id: string, task: ModelTask): ModelSpec {
  return { ...TASK_SPECS[task], id };
}

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

/**
 * `rmbg=background-removal,yolo=detection`: the task behind each configured model id, as
 * the Node and Workers entries read it from `GANTRY_MODEL_TASKS`.
 */
export function parseModelTasks(raw: string | undefined): Record<string, ModelTask> {
  const tasks: Record<string, ModelTask> = {};
  for (const pair of (raw ?? "").split(",")) {
    if (pair.trim() === "") continue;
    const [id = "", task = "", ...rest] = pair.split("=").map((part) => part.trim());
    const parsed = ModelTask.safeParse(task);
    if (id === "" || rest.length > 0 || !parsed.success) {
      throw new Error(
        `GANTRY_MODEL_TASKS entry "${pair.trim()}" must be id=task, the task one of ${MODEL_TASKS.join(", ")}.`,
      );
    }
    tasks[id] = parsed.data;
  }
  return tasks;
}
