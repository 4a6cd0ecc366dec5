/**
 * The task catalog in the OpenAPI document: per task, the `input` a job of its models takes
 * (`OcrInput`) and the `output` a succeeded one holds (`OcrOutput`), so a client generator
 * can type both. `GET /v1/models` says which task each served model runs.
 */
import { inputJsonSchema, MODEL_TASKS, outputJsonSchema, TASK_SPECS } from "../models.ts";

/** `background-removal` → `BackgroundRemoval`. */
const schemaName = (task: string) =>
  task.replace(/(^|-)([a-z])/g, (_, _dash: string, letter: string) => letter.toUpperCase());

export function taskComponentSchemas(): Record<string, object> {
  return Object.fromEntries(
    MODEL_TASKS.flatMap((task) => {
      const spec = TASK_SPECS[task];
      const name = schemaName(task);
      return [
        [`${name}Input`, { ...inputJsonSchema(spec), "x-task": task }],
        [`${name}Output`, { ...outputJsonSchema(spec), "x-task": task }],
      ];
    }),
  );
}
