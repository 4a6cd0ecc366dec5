import { z } from "zod";
import { ClassScore } from "./classification.ts";
import { imageTask, Unit } from "./task.ts";

export const Detection = ClassScore.extend({
  /** `[x1, y1, x2, y2]` in original image pixels. */
  box: z.tuple([z.number(), z.number(), z.number(), z.number()]),
});

export const DetectionOutput = z.object({
  width: z.number().int().min(1),
  height: z.number().int().min(1),
  /** Best first. */
  detections: z.array(Detection),
});
export type DetectionOutput = z.infer<typeof DetectionOutput>;

export const detectionTask = imageTask({
  id: "detection",
  description:
    "Object detection (YOLOv8/YOLO11). Output: {width, height, detections: [{label, class_id, score, box}]}.",
  // A job may tighten or loosen the model's thresholds for itself.
  params: z.strictObject({
    confidence: Unit.optional().describe("Lowest score kept; the model's default (0.25)."),
    iou: Unit.optional().describe("NMS IoU threshold; the model's default (0.45)."),
    max_detections: z.number().int().min(1).max(10_000).optional(),
  }),
  artifacts: [],
  output: DetectionOutput,
  defaultTimeoutSeconds: 120,
});
