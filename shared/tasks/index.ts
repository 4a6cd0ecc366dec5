/**
 * The task catalog: every task a model may run, in one place. A task's parameters, content
 * types, artifacts and output are read from here by the gateway (validation, `GET
 * /v1/models`, the OpenAPI document), the agent (models.yaml, its pipelines), the SDK and
 * the console. A new task is one file here plus its pipeline in `gpu-agent/pipelines/`.
 */
import { z } from "zod";
import { InputRef } from "../protocol/job.ts";
import { backgroundRemovalTask } from "./background-removal.ts";
import { classificationTask } from "./classification.ts";
import { detectionTask } from "./detection.ts";
import { noopTask } from "./noop.ts";
import { ocrTask } from "./ocr.ts";
import type { TaskDefinition } from "./task.ts";
import { tensorTask } from "./tensor.ts";

export * from "./task.ts";

/** Every task, by id; the order is the one error messages and listings show. */
export const TASKS = {
  ocr: ocrTask,
  "background-removal": backgroundRemovalTask,
  detection: detectionTask,
  classification: classificationTask,
  tensor: tensorTask,
  noop: noopTask,
} as const satisfies Record<string, TaskDefinition>;

export type ModelTask = keyof typeof TASKS;
export const MODEL_TASKS = Object.keys(TASKS) as [ModelTask, ...ModelTask[]];
/** A models.yaml `task`, or a `GANTRY_MODEL_TASKS` entry's. */
export const ModelTask = z.enum(MODEL_TASKS);

/** The tasks served without a models.yaml entry, under their own id. */
export const BUILTIN_TASKS: readonly ModelTask[] = MODEL_TASKS.filter((id) => TASKS[id].builtin);

/**
 * A job's whole `input` for a task: `image` (an upload id or https URL) first, then the
 * task's parameters, as strict or as open to other keys as the parameters are.
 */
export function taskInput(task: TaskDefinition): z.ZodObject {
  if (task.image === "none") return task.params;
  const image = task.image === "required" ? InputRef : InputRef.optional();
  const input = z.object({ image, ...task.params.shape });
  const extra = task.params.def.catchall;
  return extra ? input.catchall(extra) : input;
}
