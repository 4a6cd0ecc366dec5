import type { Letterbox } from "../vision/resize.ts";

/** A detection in original image pixels: corners, class and confidence. */
export interface Detection {
  classId: number;
  score: number;
  x1: number;
  y1: number;
  x2: number;
  y2: number;
}

export interface DecodeOptions {
  /** Candidates below this class score are dropped before NMS. */
  confidence: number;
  /** Boxes of one class overlapping a better one by more than this are suppressed. */
  iou: number;
  maxDetections: number;
}

/**
 * Decodes a YOLOv8/YOLO11 head, `[4 + classes, anchors]` for one image (row-major, the
 * batch axis already split off): per anchor `cx, cy, w, h` in letterboxed pixels, then one
 * score per class (already sigmoid). As Ultralytics' `non_max_suppression`: best class per
 * anchor, confidence filter, class-wise NMS, at most `maxDetections` by score.
 */
export function decodeYolo(
  data: ArrayLike<number>,
  classes: number,
  anchors: number,
  options: DecodeOptions,
): Detection[] {
  const candidates: Detection[] = [];
  for (let a = 0; a < anchors; a++) {
    let best = 0;
    let score = data[4 * anchors + a]!;
    for (let c = 1; c < classes; c++) {
      const s = data[(4 + c) * anchors + a]!;
      if (s > score) {
        best = c;
        score = s;
      }
    }
    // Strictly above, as Ultralytics' `amax(1) > conf_thres`.
    if (!(score > options.confidence)) continue;
    const cx = data[a]!;
    const cy = data[anchors + a]!;
    const w = data[2 * anchors + a]!;
    const h = data[3 * anchors + a]!;
    candidates.push({
      classId: best,
      score,
      x1: cx - w / 2,
      y1: cy - h / 2,
      x2: cx + w / 2,
      y2: cy + h / 2,
    });
  }
  return classwiseNms(candidates, options.iou).slice(0, options.maxDetections);
}

/** Greedy NMS within each class; the survivors sorted by score, best first. */
export function classwiseNms(boxes: readonly Detection[], iouThreshold: number): Detection[] {
  const sorted = [...boxes].sort((a, b) => b.score - a.score);
  const kept: Detection[] = [];
  for (const box of sorted) {
    const overlaps = kept.some(
      (other) => other.classId === box.classId && iou(box, other) > iouThreshold,
    );
    if (!overlaps) kept.push(box);
  }
  return kept;
}

export function iou(a: Detection, b: Detection): number {
  const width = Math.max(0, Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1));
  const height = Math.max(0, Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1));
  const intersection = width * height;
  const union = (a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - intersection;
  return union > 0 ? intersection / union : 0;
}

/** Maps a box from letterboxed to original pixels (Ultralytics' `scale_boxes`), clipped. */
export function unletterbox(
  box: Detection,
  { scale, left, top }: Letterbox,
  width: number,
  height: number,
): Detection {
  const clip = (value: number, max: number) => Math.min(max, Math.max(0, value));
  return {
    ...box,
    x1: clip((box.x1 - left) / scale, width),
    y1: clip((box.y1 - top) / scale, height),
    x2: clip((box.x2 - left) / scale, width),
    y2: clip((box.y2 - top) / scale, height),
  };
}
