import { z } from "zod";
import { imageTask, Unit } from "./task.ts";

/** One class the model saw: its label (`class_<i>` without labels), index and score. */
export const ClassScore = z.object({
  label: z.string(),
  class_id: z.number().int().min(0),
  score: Unit,
});

export const ClassificationOutput = z.object({
  /** The `top_k` most likely classes, most likely first. */
  predictions: z.array(ClassScore),
});
export type ClassificationOutput = z.infer<typeof ClassificationOutput>;

export const classificationTask = imageTask({
  id: "classification",
  description:
    "Image classification (ImageNet-style). Output: {predictions: [{label, class_id, score}]}, top-k.",
  params: z.strictObject({
    top_k: z.number().int().min(1).max(1000).optional(),
  }),
  artifacts: [],
  output: ClassificationOutput,
  defaultTimeoutSeconds: 60,
});
