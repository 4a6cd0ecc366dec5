import { z } from "zod";
import { MAX_TIMEOUT_SECONDS } from "../../shared/tasks/index.ts";

/**
 * Which pipeline and ONNX file back one model id, with its batch limits. Pipeline-specific
 * options (labels, thresholds, the mask activation, …) sit beside these keys and are checked
 * by the pipeline when it loads, so a typo fails start-up with the model id in the message.
 *
 * The models.yaml registry builds these; until then a caller passes them in RunnerOptions.
 */
export const ModelConfig = z.looseObject({
  /** The pipeline that runs the model: `ocr`, `noop`, `background-removal`, `detection`, … */
  pipeline: z.string().min(1),
  /** The ONNX file, a local path. Required by every pipeline but `ocr` and `noop`. */
  file: z.string().min(1).optional(),
  /**
   * Most jobs run as one batch. Only models whose first input axis is dynamic batch; a model
   * with a fixed batch of one runs one job at a time whatever this says.
   */
  max_batch: z.number().int().min(1).max(1024).optional(),
  /** How long a job waits for others of the same model to join its batch. */
  batch_window_ms: z.number().min(0).max(1000).optional(),
  /**
   * The model's execution limit for jobs that left theirs to the model (the gateway knows
   * only the task's default), and whether a run over it is retried (default: not).
   */
  timeout_seconds: z.number().int().min(1).max(MAX_TIMEOUT_SECONDS).optional(),
  timeout_transient: z.boolean().optional(),
  /**
   * What the loaded model takes on its device (MiB), as models.yaml declares it; absent,
   * the runner measures it after the load.
   */
  memory_mb: z.number().min(0).optional(),
  /** On a GPU, through onnxruntime's TensorRT provider first (overrides GANTRY_TENSORRT). */
  tensorrt: z.boolean().optional(),
});
export type ModelConfig = z.infer<typeof ModelConfig>;

/** Whether a model opens its CUDA sessions through TensorRT: its own `tensorrt`, else the runner's. */
export function wantsTensorrt(
  config: ModelConfig | undefined,
  runner: boolean | undefined,
): boolean {
  return config?.tensorrt ?? runner ?? false;
}

/**
 * A model that cannot load on any provider: its models.yaml entry or its file is wrong (bad
 * options, labels that do not match the graph, a file onnxruntime cannot read, a graph of
 * the wrong shape for its task). Retrying does not help, so the agent stops at start naming
 * it instead of forking runners that fail the same way for ever.
 */
export class ModelConfigError extends Error {
  /** The code of the runner's start error it becomes (a permanent one). */
  static readonly code = "model_invalid";

  constructor(message: string) {
    super(message);
    this.name = "ModelConfigError";
  }
}

/** The batch size a model gets when its axis is dynamic and its config names none. */
export const DEFAULT_MAX_BATCH = 8;

/**
 * Parses a pipeline's own options out of a model config, naming the model on failure. The
 * common keys are dropped first so a pipeline's schema may be strict.
 */
export function pipelineOptions<T extends z.ZodType>(
  schema: T,
  modelId: string,
  config: ModelConfig | undefined,
): z.infer<T> {
  const {
    pipeline: _pipeline,
    file: _file,
    max_batch: _maxBatch,
    batch_window_ms: _window,
    timeout_seconds: _timeout,
    timeout_transient: _transient,
    memory_mb: _memory,
    tensorrt: _tensorrt,
    ...rest
  } = config ?? { pipeline: "" };
  const parsed = schema.safeParse(rest);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues
    .map((issue) => `${issue.path.join(".") || "(options)"}: ${issue.message}`)
    .join("; ");
  throw new ModelConfigError(`model ${modelId}: invalid options: ${problems}`);
}

/** The model's ONNX file, or a clear start-up error naming the model. */
export function requireModelFile(modelId: string, config: ModelConfig | undefined): string {
  if (!config?.file) {
    throw new ModelConfigError(
      `model ${modelId} (${config?.pipeline ?? "?"}) needs an ONNX \`file\``,
    );
  }
  return config.file;
}
