/**
 * Differentiable Binarization (DB) post-processing, after PaddleOCR's DBPostProcess with its
 * published defaults. Boxes are axis-aligned: the pipeline serves horizontal text, and a
 * rectangle keeps the crop and its coordinates simple.
 */

/** A rectangle in pixel coordinates; `right` and `bottom` are exclusive. */
export interface Rect {
  left: number;
  top: number;
  right: number;
  bottom: number;
}

export interface DbOptions {
  /** Probability above which a pixel counts as text. */
  threshold: number;
  /** Minimum mean probability inside a box for it to be kept. */
  boxThreshold: number;
  /** How far a box grows back out: offset = area * ratio / perimeter. */
  unclipRatio: number;
  /** Boxes whose short side is below this (in map pixels) are noise. */
  minSize: number;
  /** Stops pathological maps (noise images) from producing endless boxes. */
  maxCandidates: number;
}

export const DB_DEFAULTS: DbOptions = {
  threshold: 0.3,
  boxThreshold: 0.6,
  unclipRatio: 1.5,
  minSize: 3,
  maxCandidates: 1000,
};

/** Finds text boxes in a probability map of `width` x `height` (map coordinates). */
export function dbBoxes(
  probabilities: Float32Array,
  width: number,
  height: number,
  options: DbOptions = DB_DEFAULTS,
): Rect[] {
  const components = connectedComponents(probabilities, width, height, options.threshold);
  const boxes: Rect[] = [];
  for (const component of components.slice(0, options.maxCandidates)) {
    // Like cv2.minAreaRect over contour points: the extent between outermost pixel centres.
    const sideW = component.maxX - component.minX;
    const sideH = component.maxY - component.minY;
    if (Math.min(sideW, sideH) < options.minSize) continue;
    const score = meanInside(probabilities, width, component);
    if (score < options.boxThreshold) continue;
    // The network predicts shrunken text kernels; grow each back by the DB offset.
    const area = sideW * sideH;
    const perimeter = 2 * (sideW + sideH);
    const offset = (area * options.unclipRatio) / perimeter;
    if (Math.min(sideW, sideH) + 2 * offset < options.minSize + 2) continue;
    boxes.push({
      left: component.minX - offset,
      top: component.minY - offset,
      right: component.maxX + offset,
      bottom: component.maxY + offset,
    });
  }
  return boxes;
}

interface Component {
  minX: number;
  minY: number;
  maxX: number;
  maxY: number;
}

/** 8-connected components of `map > threshold`, as bounding boxes (inclusive pixels). */
export function connectedComponents(
  map: Float32Array,
  width: number,
  height: number,
  threshold: number,
): Component[] {
  const visited = new Uint8Array(width * height);
  const stack = new Int32Array(width * height);
  const components: Component[] = [];
  for (let start = 0; start < map.length; start++) {
    if (visited[start] || map[start]! <= threshold) continue;
    visited[start] = 1;
    let top = 0;
    stack[top++] = start;
    const component = { minX: width, minY: height, maxX: -1, maxY: -1 };
    while (top > 0) {
      const index = stack[--top]!;
      const x = index % width;
      const y = (index - x) / width;
      if (x < component.minX) component.minX = x;
      if (x > component.maxX) component.maxX = x;
      if (y < component.minY) component.minY = y;
      if (y > component.maxY) component.maxY = y;
      for (let dy = -1; dy <= 1; dy++) {
        const ny = y + dy;
        if (ny < 0 || ny >= height) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx;
          if (nx < 0 || nx >= width) continue;
          const next = ny * width + nx;
          if (visited[next] || map[next]! <= threshold) continue;
          visited[next] = 1;
          stack[top++] = next;
        }
      }
    }
    components.push(component);
  }
  return components;
}

/** PaddleOCR's "fast" box score: the mean probability over the box's pixels. */
function meanInside(map: Float32Array, width: number, box: Component): number {
  let sum = 0;
  for (let y = box.minY; y <= box.maxY; y++) {
    for (let x = box.minX; x <= box.maxX; x++) sum += map[y * width + x]!;
  }
  return sum / ((box.maxX - box.minX + 1) * (box.maxY - box.minY + 1));
}
