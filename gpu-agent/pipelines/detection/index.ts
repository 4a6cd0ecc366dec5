import type * as ort from "onnxruntime-node";
import { z } from "zod";
import { type DetectionOutput, detectionTask } from "../../../shared/tasks/detection.ts";
import { runStacked } from "../../batching/stack.ts";
import { stagedPipeline } from "../../batching/staged.ts";
import type { RunRequest } from "../../inference/types.ts";
import { ModelConfigError } from "../model-config.ts";
import { decodeImage } from "../ocr/image.ts";
import {
  imageInput,
  type LoadedPipeline,
  type PipelineDefinition,
  taskParams,
} from "../pipeline.ts";
import { loadImageModel } from "../vision/image-model.ts";
import { maxBatchFor } from "../vision/input-shape.ts";
import { UNIT_SCALE } from "../vision/planes.ts";
import { type Letterbox, letterbox } from "../vision/resize.ts";
import { COCO_LABELS } from "./coco-labels.ts";
import { decodeYolo, unletterbox } from "./yolo.ts";

const Threshold = z.number().min(0).max(1);

/** Ultralytics' defaults: confidence 0.25, NMS IoU 0.45 (predict), 300 detections. */
const Options = z.strictObject({
  /** Class names in the model's order; COCO's 80 by default for an 80-class model. */
  labels: z.array(z.string()).min(1).optional(),
  confidence: Threshold.default(0.25),
  iou: Threshold.default(0.45),
  max_detections: z.number().int().min(1).max(10_000).default(300),
  /** The input size when the model's height and width are dynamic. */
  input_size: z.number().int().min(32).max(4096).default(640),
});

export type { DetectionOutput };

type Params = z.infer<typeof detectionTask.params>;

interface Prepared {
  tensor: ort.Tensor;
  box: Letterbox;
  width: number;
  height: number;
  params: Params;
}

/**
 * Object detection with a YOLOv8/YOLO11 ONNX export (`[N, 3, 640, 640]` in, `[N, 4 + classes,
 * anchors]` out): letterbox to the input size with grey 114 padding, RGB scaled to 0..1,
 * confidence filter, class-wise NMS, boxes mapped back through the letterbox.
 */
export const detectionPipeline: PipelineDefinition = {
  id: detectionTask.id,
  async load(loading): Promise<LoadedPipeline> {
    const { config, modelId = "detection" } = loading;
    const model = await loadImageModel(Options, { ...loading, modelId });
    const { options, session, shape, width, height } = model;
    const outputName = session.outputNames[0]!;
    // Check the labels against the head now when its class axis is fixed, not on every job.
    const head = session.outputMetadata[0];
    const rows = head?.isTensor ? head.shape[1] : undefined;
    // A graph that cannot be a YOLO head (a classifier's [N, classes]) would fail every job.
    if (head?.isTensor && (head.shape.length !== 3 || (typeof rows === "number" && rows < 5))) {
      throw new ModelConfigError(
        `model ${modelId}: expected a YOLO head [N, 4 + classes, anchors] as its first output, got ${head.type} [${head.shape.join(", ")}]`,
      );
    }
    if (typeof rows === "number") labelOf(rows - 4);

    const toTensor = (pixels: Uint8Array) => model.toTensor(pixels, UNIT_SCALE);
    function labelOf(classes: number) {
      const labels = options.labels ?? (classes === COCO_LABELS.length ? COCO_LABELS : null);
      if (labels && labels.length !== classes) {
        throw new ModelConfigError(
          `model ${modelId} has ${classes} classes but ${labels.length} labels`,
        );
      }
      return (id: number) => labels?.[id] ?? `class_${id}`;
    }

    const staged = stagedPipeline<Prepared, ort.Tensor>(
      {
        async prepare(request: RunRequest) {
          const params = taskParams(detectionTask.params, request);
          const image = await decodeImage(imageInput(request, modelId));
          const boxed = await letterbox(image, width, height);
          return {
            tensor: toTensor(boxed.image.data),
            box: boxed.box,
            width: image.width,
            height: image.height,
            params,
          };
        },
        async infer(items) {
          const outputs = await runStacked(
            session,
            items.map((item) => ({ [shape.name]: item.tensor })),
            [outputName],
          );
          return outputs.map((output) => output[outputName]!);
        },
        finish(item, head): DetectionOutput {
          const [, rows, anchors] = head.dims;
          if (head.type !== "float32" || head.dims.length !== 3 || !rows || rows < 5 || !anchors) {
            throw new Error(`unexpected YOLO output ${head.type} [${head.dims.join(", ")}]`);
          }
          const classes = rows - 4;
          const label = labelOf(classes);
          const found = decodeYolo(head.data as Float32Array, classes, anchors, {
            confidence: item.params.confidence ?? options.confidence,
            iou: item.params.iou ?? options.iou,
            maxDetections: item.params.max_detections ?? options.max_detections,
          });
          const round = (value: number) => Math.round(value * 100) / 100;
          return {
            width: item.width,
            height: item.height,
            detections: found.map((detection) => {
              const box = unletterbox(detection, item.box, item.width, item.height);
              return {
                label: label(box.classId),
                class_id: box.classId,
                score: Math.round(box.score * 1e4) / 1e4,
                box: [round(box.x1), round(box.y1), round(box.x2), round(box.y2)],
              };
            }),
          };
        },
      },
      maxBatchFor(shape.dynamicBatch, config),
    );

    return {
      ...staged,
      async warm() {
        const grey = new Uint8Array(width * height * 3).fill(114);
        await session.run({ [shape.name]: toTensor(grey) }, [outputName]);
      },
      release: () => session.release(),
    };
  },
};
