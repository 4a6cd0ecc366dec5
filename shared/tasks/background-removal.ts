import { z } from "zod";
import { ArtifactRef, defineTask, IMAGE_TYPES } from "./task.ts";

/** PNG cutouts and masks at the original size: 8192² RGBA compresses well below this. */
const MAX_PNG_ARTIFACT_BYTES = 256 * 1024 * 1024;

const size = { width: z.number().int().min(1), height: z.number().int().min(1) };

/** The output: the image's size and the PNG, under `image_png` or `mask_png` by `format`. */
export const BackgroundRemovalOutput = z.discriminatedUnion("format", [
  z.object({ ...size, format: z.literal("cutout"), image_png: ArtifactRef }),
  z.object({ ...size, format: z.literal("mask"), mask_png: ArtifactRef }),
]);
export type BackgroundRemovalOutput = z.infer<typeof BackgroundRemovalOutput>;

export const backgroundRemovalTask = defineTask({
  id: "background-removal",
  description:
    "Background removal (RMBG-2.0, BiRefNet, U²-Net). Output: {width, height, format} and " +
    "the PNG as artifact `image_png` (cutout with alpha) or `mask_png` (the mask alone).",
  image: "required",
  contentTypes: IMAGE_TYPES,
  params: z.strictObject({
    format: z
      .enum(["cutout", "mask"])
      .optional()
      .describe("`cutout` (default): the image with the mask as alpha; `mask`: the mask alone."),
  }),
  artifacts: [
    { name: "image_png", content_type: "image/png", max_bytes: MAX_PNG_ARTIFACT_BYTES },
    { name: "mask_png", content_type: "image/png", max_bytes: MAX_PNG_ARTIFACT_BYTES },
  ],
  output: BackgroundRemovalOutput,
  decodesImage: true,
  builtin: false,
  defaultTimeoutSeconds: 300,
});
