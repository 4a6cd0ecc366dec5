import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type DetectionOutput,
  detectionPipeline,
} from "../../gpu-agent/pipelines/detection/index.ts";
import { type LoadedPipeline, PipelineFailure } from "../../gpu-agent/pipelines/pipeline.ts";
import { imageRequest, loadOnCpu, modelFolder, yoloModel } from "../helpers/onnx-models.ts";

const models = modelFolder();
afterAll(() => models.cleanup());

const SIZE = 64;
const LABELS = ["cat", "dog", "car"];

/**
 * A YOLO head for a 128×64 image letterboxed into 64×64: scale 0.5, 16 px of grey above
 * and below. Boxes are given in original pixels and written as the model would see them.
 */
function head(anchors: { box: [number, number, number, number]; scores: number[] }[]) {
  const n = anchors.length;
  const data = new Float32Array((4 + LABELS.length) * n);
  anchors.forEach(({ box: [x1, y1, x2, y2], scores }, a) => {
    const [lx1, ly1, lx2, ly2] = [x1 * 0.5, y1 * 0.5 + 16, x2 * 0.5, y2 * 0.5 + 16];
    data[a] = (lx1 + lx2) / 2;
    data[n + a] = (ly1 + ly2) / 2;
    data[2 * n + a] = lx2 - lx1;
    data[3 * n + a] = ly2 - ly1;
    scores.forEach((score, c) => {
      data[(4 + c) * n + a] = score;
    });
  });
  return data;
}

const ANCHORS = [
  { box: [10, 10, 50, 40], scores: [0.9, 0.1, 0] }, // a cat
  { box: [12, 10, 52, 40], scores: [0.8, 0, 0] }, // the same cat again: NMS drops it
  { box: [10, 10, 50, 40], scores: [0, 0.7, 0] }, // a dog in the same place: another class
  { box: [80, 20, 120, 60], scores: [0, 0, 0.1] }, // below the confidence threshold
  { box: [80, 20, 124, 60], scores: [0, 0, 0.6] }, // a car
] satisfies { box: [number, number, number, number]; scores: number[] }[];

const image = () =>
  sharp({ create: { width: 128, height: 64, channels: 3, background: "#336699" } })
    .png()
    .toBuffer();

describe("detection (YOLOv8/YOLO11 head)", () => {
  let pipeline: LoadedPipeline;

  beforeAll(async () => {
    const file = models.write(
      "yolo.onnx",
      yoloModel({ size: SIZE, classes: 3, anchors: ANCHORS.length, head: head(ANCHORS) }),
    );
    pipeline = await loadOnCpu(detectionPipeline, "yolo", {
      pipeline: "detection",
      file,
      labels: LABELS,
    });
  });
  afterAll(() => pipeline?.release());

  it("filters by confidence, suppresses per class, maps boxes back through the letterbox", async () => {
    const output = (await pipeline.run(imageRequest("yolo", await image()))) as DetectionOutput;
    expect(output.width).toBe(128);
    expect(output.height).toBe(64);
    expect(output.detections).toEqual([
      { label: "cat", class_id: 0, score: 0.9, box: [10, 10, 50, 40] },
      { label: "dog", class_id: 1, score: 0.7, box: [10, 10, 50, 40] },
      // x2 124 is inside the image; a box past the edge would be clipped to 128.
      { label: "car", class_id: 2, score: 0.6, box: [80, 20, 124, 60] },
    ]);
  });

  it("takes the thresholds from the job when it gives them", async () => {
    const request = imageRequest("yolo", await image(), { confidence: 0.75, iou: 0.99 });
    const output = (await pipeline.run(request)) as DetectionOutput;
    expect(output.detections.map((d) => [d.label, d.score])).toEqual([
      ["cat", 0.9],
      ["cat", 0.8],
    ]);
    const bad = await pipeline.run(imageRequest("yolo", await image(), { iou: 2 })).catch((e) => e);
    expect(bad).toBeInstanceOf(PipelineFailure);
    expect((bad as PipelineFailure).jobError).toMatchObject({ code: "invalid_params" });
  });

  it("runs a batch: each image as alone, a corrupt one failing by itself", async () => {
    const good = imageRequest("yolo", await image());
    const settled = await pipeline.runBatch!([good, imageRequest("yolo", new Uint8Array(3)), good]);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    const alone = await pipeline.run(good);
    expect((settled[0] as PromiseFulfilledResult<unknown>).value).toEqual(alone);
    expect((settled[2] as PromiseFulfilledResult<unknown>).value).toEqual(alone);
    expect((settled[1] as PromiseRejectedResult).reason).toMatchObject({
      jobError: { type: "permanent", code: "invalid_image" },
    });
  });
});

describe("detection model config", () => {
  it("names COCO classes for an 80-class model without labels", async () => {
    const scores = Array(80).fill(0);
    scores[16] = 0.95;
    const data = new Float32Array(84);
    data.set([32, 32, 10, 10], 0);
    data.set(scores, 4);
    const file = models.write(
      "coco.onnx",
      yoloModel({ size: SIZE, classes: 80, anchors: 1, head: data, batch: 1 }),
    );
    const pipeline = await loadOnCpu(detectionPipeline, "yolov8n", { pipeline: "detection", file });
    try {
      expect(pipeline.maxBatch).toBe(1);
      const output = (await pipeline.run(
        imageRequest("yolov8n", await image()),
      )) as DetectionOutput;
      expect(output.detections.map((d) => d.label)).toEqual(["dog"]);
    } finally {
      await pipeline.release();
    }
  });

  it("refuses labels that do not match the model's classes", async () => {
    const file = models.write(
      "three.onnx",
      yoloModel({ size: SIZE, classes: 3, anchors: 1, head: new Float32Array(7) }),
    );
    await expect(
      loadOnCpu(detectionPipeline, "yolo", { pipeline: "detection", file, labels: ["a", "b"] }),
    ).rejects.toThrow("model yolo has 3 classes but 2 labels");
  });
});
