import { z } from "zod";
import { JsonSchemaObject } from "../shared/protocol/index.ts";
import {
  type ArtifactSpec,
  FALLBACK_TIMEOUT_SECONDS,
  MAX_IMAGE_PIXELS,
  MAX_IMAGE_SIDE,
  MODEL_TASKS,
  ModelTask,
  TASKS,
  taskInput,
} from "../shared/tasks/index.ts";

export {
  type ArtifactSpec,
  IMAGE_TYPES,
  MAX_IMAGE_PIXELS,
  MAX_IMAGE_SIDE,
  MODEL_TASKS,
  ModelTask,
} from "../shared/tasks/index.ts";

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
  /** A succeeded job's `output`. */
  output: z.ZodType;
  /** Decoded-image bounds, or null for a model that does not decode images. */
  maxPixels: number | null;
  maxSide: number | null;
  /** A job's `timeout_seconds` when it names none (the task's default). */
  defaultTimeoutSeconds: number;
}

/** A model of a task, as the task catalog describes it, under the model's id. */
function taskSpec(task: ModelTask): ModelSpec {
  const entry = TASKS[task];
  return {
    id: task,
    task,
    description: entry.description,
    requiresImage: entry.image === "required",
    contentTypes: [...entry.contentTypes],
    input: taskInput(entry),
    output: entry.output,
    maxPixels: entry.decodesImage ? MAX_IMAGE_PIXELS : null,
    maxSide: entry.decodesImage ? MAX_IMAGE_SIDE : null,
    defaultTimeoutSeconds: entry.defaultTimeoutSeconds ?? FALLBACK_TIMEOUT_SECONDS,
    ...(entry.artifacts.length > 0 ? { artifacts: entry.artifacts } : {}),
  };
}

/** What a model of each task takes; models that models.yaml names get their task's spec. */
export const TASK_SPECS = Object.fromEntries(
  MODEL_TASKS.map((task) => [task, taskSpec(task)]),
) as Record<ModelTask, ModelSpec>;

/** The models served without a task: the catalog's built-in tasks under their own ids. */
export const BUILTIN_MODELS: Record<string, ModelSpec> = Object.fromEntries(
  MODEL_TASKS.filter((task) => TASKS[task].builtin).map((task) => [task, TASK_SPECS[task]]),
);

/** The spec of a configured model: its task's, under its own id. */
export function specForTask(id: string, task: ModelTask): ModelSpec {
  return { ...TASK_SPECS[task], id };
}

const jsonSchemas = new WeakMap<z.ZodType, JsonSchemaObject>();

/**
 * A zod schema as JSON Schema without its dialect line (made once per schema), read back
 * through the public API's own schema of one so that it is typed as clients see it.
 */
function jsonSchemaOf(schema: z.ZodType, io: "input" | "output"): JsonSchemaObject {
  let made = jsonSchemas.get(schema);
  if (!made) {
    const { $schema: _dialect, ...body } = z.toJSONSchema(schema, { io, unrepresentable: "any" });
    made = JsonSchemaObject.parse(body);
    jsonSchemas.set(schema, made);
  }
  return made;
}

/** A model's `input` as JSON Schema, for `GET /v1/models`. */
export function inputJsonSchema(spec: ModelSpec): JsonSchemaObject {
  return jsonSchemaOf(spec.input, "input");
}

/** A model's succeeded `output` as JSON Schema, for `GET /v1/models`. */
export function outputJsonSchema(spec: ModelSpec): JsonSchemaObject {
  return jsonSchemaOf(spec.output, "output");
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
        `entry "${pair.trim()}" must be id=task, the task one of ${MODEL_TASKS.join(", ")}`,
      );
    }
    tasks[id] = parsed.data;
  }
  return tasks;
}
