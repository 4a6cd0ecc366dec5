/**
 * The shape of one entry of the task catalog. Runtime-free (zod only): the gateway on
 * Workers, the agent on Node, the OpenAPI document, the SDK and the console all read it.
 */
import { z } from "zod";

/** What an `input.image` upload of an image task may be. */
export const IMAGE_TYPES = [
  "image/png",
  "image/jpeg",
  "image/webp",
  "image/avif",
  "image/tiff",
  "image/gif",
] as const;

/**
 * Image types no served model decodes, with what to do instead: the `415` says so. HEIC is
 * HEVC inside HEIF; the agents' sharp decodes AV1 (AVIF) from HEIF, not HEVC.
 */
export const UNDECODED_IMAGE_TYPES: Readonly<Record<string, string>> = {
  "image/heic": "HEIC (HEVC) images are not decoded here: convert to JPEG, PNG, WebP or AVIF.",
  "image/heif":
    "HEIF images are accepted as AVIF (image/avif) only; HEVC-coded HEIF is not decoded.",
};

/**
 * Decoded-image bounds the agent enforces before inference (a small file can decode to a
 * giant image); `GET /v1/models` shows them as the model's limits.
 */
export const MAX_IMAGE_PIXELS = 50_000_000;
export const MAX_IMAGE_SIDE = 8192;

/** A binary file a model's runs may make beside the JSON output, under this output key. */
export interface ArtifactSpec {
  name: string;
  content_type: string;
  max_bytes: number;
  /**
   * When the job's parameters choose the file's type (background removal's `format`): the
   * type for a job's input, bound into its upload URL; `content_type` otherwise.
   */
  contentTypeFor?: (input: Readonly<Record<string, unknown>>) => string;
}

/**
 * What a job's output holds under an artifact's name once the agent has stored it; the bytes
 * themselves are at `GET /v1/jobs/{id}/artifacts/{name}`, or inline as `base64` when the
 * gateway gave no upload URL and the file is small.
 */
export const ArtifactRef = z.object({
  content_type: z.string(),
  size_bytes: z.number().int().min(0),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  base64: z.string().optional(),
});
export type ArtifactRef = z.infer<typeof ArtifactRef>;

/** Whether a task's `input.image` must, may or must not be given. */
export type ImageUse = "required" | "optional" | "none";

export interface TaskDefinition<
  Params extends z.ZodObject = z.ZodObject,
  Output extends z.ZodType = z.ZodType,
> {
  /** A models.yaml `task`, and the pipeline that runs it. */
  id: string;
  description: string;
  image: ImageUse;
  /** What an `input.image` upload may be; empty for a task that reads no file. */
  contentTypes: readonly string[];
  /**
   * The model's parameters: every `input` key but the files. The gateway validates a job's
   * input with it (plus `image`) and the agent's pipeline parses the same keys with it.
   */
  params: Params;
  /** The files a run may make: the claim carries an upload URL for each. */
  artifacts: readonly ArtifactSpec[];
  /** A succeeded job's `output`, artifact references included. */
  output: Output;
  /** Whether the agent decodes `input.image` (and so enforces the image bounds). */
  decodesImage: boolean;
  /** Served without a models.yaml entry, under the task's own id (`ocr`, `noop`). */
  builtin: boolean;
  /** How long one run should take at most, by default; a model config may say otherwise. */
  defaultTimeoutSeconds?: number;
  /**
   * Whether a run over its timeout may succeed on another try (a model whose run time
   * varies with load), so the job is retried; default false: it fails for good.
   */
  timeoutTransient?: boolean;
}

/** A job's execution limit when its task names no default. */
export const FALLBACK_TIMEOUT_SECONDS = 600;

export { MAX_TIMEOUT_SECONDS } from "../protocol/job.ts";

/** Keeps each entry's own parameter and output types while checking it is a task. */
export const defineTask = <Params extends z.ZodObject, Output extends z.ZodType>(
  task: TaskDefinition<Params, Output>,
): TaskDefinition<Params, Output> => task;

/** The fields every image task shares: a required `input.image`, decoded by the agent. */
type ImageTaskFields = "image" | "contentTypes" | "decodesImage" | "builtin";

/** An image task's entry: `input.image` required, any image type, not built in unless said. */
export const imageTask = <Params extends z.ZodObject, Output extends z.ZodType>(
  task: Omit<TaskDefinition<Params, Output>, ImageTaskFields> & { builtin?: boolean },
): TaskDefinition<Params, Output> =>
  defineTask({
    image: "required",
    contentTypes: IMAGE_TYPES,
    decodesImage: true,
    ...task,
    builtin: task.builtin ?? false,
  });

/** A score or threshold between 0 and 1. */
export const Unit = z.number().min(0).max(1);
