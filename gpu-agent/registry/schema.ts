import { z } from "zod";
import { ModelId } from "../../shared/protocol/job.ts";
import { ModelTask } from "../../shared/tasks/index.ts";

/** The tasks a registry entry may name (the task catalog): `task` picks the pipeline. */
export { ModelTask };

/** Where a file comes from: a local path (relative to models.yaml), https://, or s3://bucket/key. */
const FileSource = z
  .string()
  .trim()
  .min(1)
  .refine((url) => !/^[a-z][a-z0-9+.-]+:\/\//i.test(url) || /^(https?|s3):\/\//i.test(url), {
    error: "must be a local path, an https:// URL or an s3://bucket/key URL",
  });

export const ModelFileEntry = z.object({
  /** What the pipeline calls the file: `model` is the ONNX graph; others are extras. */
  name: z.string().regex(/^[a-z0-9][a-z0-9._-]*$/i, "letters, digits, '.', '_' or '-'"),
  url: FileSource,
  sha256: z
    .string()
    .trim()
    .regex(/^[0-9a-fA-F]{64}$/, "must be 64 hex digits (the output of sha256sum)")
    .transform((hex) => hex.toLowerCase()),
});
export type ModelFileEntry = z.infer<typeof ModelFileEntry>;

export const ModelEntry = z.strictObject({
  id: ModelId,
  task: ModelTask,
  files: z
    .array(ModelFileEntry)
    .refine((files) => new Set(files.map((file) => file.name)).size === files.length, {
      error: "file names must be unique within a model",
    })
    .default([]),
  /** Runner slots this model may use at once on one agent. */
  slots: z.number().int().min(1).max(64).optional(),
  /** Most jobs in one batch, for models with a dynamic batch axis. */
  max_batch: z.number().int().min(1).max(1024).optional(),
  /** Input limits: larger images fail the job permanently instead of filling VRAM. */
  limits: z
    .strictObject({
      max_pixels: z.number().int().positive().optional(),
      max_side: z.number().int().positive().optional(),
    })
    .optional(),
  /** Class names, in the model's class order (detection, classification). */
  labels: z.array(z.string()).min(1).optional(),
});
export type ModelEntry = z.infer<typeof ModelEntry>;

export const ModelRegistryFile = z.strictObject({
  models: z
    .array(ModelEntry)
    .refine((models) => new Set(models.map((model) => model.id)).size === models.length, {
      error: "model ids must be unique",
    }),
});
export type ModelRegistryFile = z.infer<typeof ModelRegistryFile>;
