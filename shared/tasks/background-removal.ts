import { z } from "zod";
import { ArtifactRef, defineTask, IMAGE_TYPES } from "./task.ts";

/** Cut-outs and masks at the original size: 8192² RGBA compresses well below this. */
const MAX_ARTIFACT_BYTES = 256 * 1024 * 1024;

/** The artifacts' file format; the mask is lossless in both. */
export const BackgroundRemovalFormat = z.enum(["png", "webp"]);
export type BackgroundRemovalFormat = z.infer<typeof BackgroundRemovalFormat>;

const IMAGE_CONTENT_TYPES: Record<BackgroundRemovalFormat, string> = {
  png: "image/png",
  webp: "image/webp",
};

/** The content type of a job's artifacts, from its `format` parameter. */
const contentTypeFor = (input: Readonly<Record<string, unknown>>): string =>
  IMAGE_CONTENT_TYPES[BackgroundRemovalFormat.catch("png").parse(input.format)];

export const BackgroundRemovalParams = z.strictObject({
  format: BackgroundRemovalFormat.default("png").describe(
    "File format of the artifacts: `png` (default, lossless) or `webp` (the cut-out lossy at quality 90 with exact alpha; the mask lossless).",
  ),
  background: z
    .string()
    .regex(/^#[0-9a-fA-F]{6}$/, "must be a #rrggbb colour")
    .optional()
    .describe(
      "Composite the cut-out onto this colour (`#ffffff`) instead of leaving it transparent.",
    ),
  mask_only: z
    .boolean()
    .default(false)
    .describe("Make only the mask (artifact `mask`), not the cut-out."),
});
export type BackgroundRemovalParams = z.infer<typeof BackgroundRemovalParams>;

const Box = z.object({
  x: z.number().int().min(0),
  y: z.number().int().min(0),
  width: z.number().int().min(1),
  height: z.number().int().min(1),
});

/**
 * The output: the image's size, where the foreground is (`bbox` of the pixels whose alpha is
 * at least half, null when none; `coverage` their share of the image), the input size the
 * model ran at (lower on a degraded retry), and the artifacts: `mask` always, `image` (the
 * cut-out at the original size) unless `mask_only`.
 */
export const BackgroundRemovalOutput = z.object({
  width: z.number().int().min(1),
  height: z.number().int().min(1),
  format: BackgroundRemovalFormat,
  bbox: Box.nullable(),
  coverage: z.number().min(0).max(1),
  input_size: z.object({ width: z.number().int().min(1), height: z.number().int().min(1) }),
  /** The decoded file's format and its frames or pages (only the first is used). */
  source: z.object({ format: z.string(), pages: z.number().int().min(1) }),
  mask: ArtifactRef,
  image: ArtifactRef.optional(),
});
export type BackgroundRemovalOutput = z.infer<typeof BackgroundRemovalOutput>;

export const backgroundRemovalTask = defineTask({
  id: "background-removal",
  description:
    "Background removal (ISNet as `rmbg`, RMBG, BiRefNet, U²-Net). Output: {width, height, " +
    "format, bbox, coverage, input_size} and the artifacts `image` (the cut-out at the " +
    "original size, transparent or on `background`) and `mask`, in `format` (png or webp).",
  image: "required",
  contentTypes: IMAGE_TYPES,
  params: BackgroundRemovalParams,
  artifacts: [
    { name: "image", content_type: "image/png", max_bytes: MAX_ARTIFACT_BYTES, contentTypeFor },
    { name: "mask", content_type: "image/png", max_bytes: MAX_ARTIFACT_BYTES, contentTypeFor },
  ],
  output: BackgroundRemovalOutput,
  decodesImage: true,
  builtin: false,
  defaultTimeoutSeconds: 300,
});
