import type { Rect } from "./db-postprocess.ts";

/** Boxes whose tops are this close (pixels) count as one row and read left to right. */
const SAME_ROW_PIXELS = 10;
/**
 * Two boxes on a row closer than this many line heights are one line the detector split. A
 * word space is about 0.3-0.5 of a line's height; table columns sit further apart.
 */
const MAX_WORD_GAP = 0.8;
/** Share of the shorter box's height two boxes must overlap vertically to share a row. */
const MIN_ROW_OVERLAP = 0.5;
/**
 * Margin added above and below each crop, as a share of its height. DB boxes hug the glyphs;
 * PP-OCRv4's recogniser was trained on looser crops and, without room around the text,
 * drops the spaces between words at small font sizes.
 */
const CROP_MARGIN = 0.25;

/**
 * Joins boxes the detector split inside one line (a wide space at large font sizes). Read
 * apart, each half's unclipped box overlaps its neighbour and the shared glyphs come out
 * twice ("149.99" then "9EUR").
 */
export function mergeRowNeighbours(boxes: readonly Rect[]): Rect[] {
  // Left to right, each box joins the first line it continues, so one pass suffices.
  const lines: Rect[] = [];
  for (const box of [...boxes].sort((a, b) => a.left - b.left)) {
    const index = lines.findIndex((line) => sameLine(line, box));
    if (index === -1) lines.push(box);
    else lines[index] = union(lines[index]!, box);
  }
  return lines;
}

function sameLine(a: Rect, b: Rect): boolean {
  const heightA = a.bottom - a.top;
  const heightB = b.bottom - b.top;
  const overlap = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
  if (overlap < MIN_ROW_OVERLAP * Math.min(heightA, heightB)) return false;
  const gap = Math.max(a.left, b.left) - Math.min(a.right, b.right);
  return gap <= MAX_WORD_GAP * Math.max(heightA, heightB);
}

function union(a: Rect, b: Rect): Rect {
  return {
    left: Math.min(a.left, b.left),
    top: Math.min(a.top, b.top),
    right: Math.max(a.right, b.right),
    bottom: Math.max(a.bottom, b.bottom),
  };
}

/** The region to read for a box: the box plus a vertical margin, clipped to the image. */
export function recognitionRegion(box: Rect, imageWidth: number, imageHeight: number): Rect {
  const margin = Math.round(CROP_MARGIN * (box.bottom - box.top));
  return {
    left: Math.max(0, box.left),
    top: Math.max(0, box.top - margin),
    right: Math.min(imageWidth, box.right),
    bottom: Math.min(imageHeight, box.bottom + margin),
  };
}

/**
 * PaddleOCR's `sorted_boxes`: top to bottom, then one bubbling pass so boxes on the same row
 * (tops within a few pixels) read left to right.
 */
export function sortReadingOrder(boxes: readonly Rect[]): Rect[] {
  const sorted = [...boxes].sort((a, b) => a.top - b.top || a.left - b.left);
  for (let i = 0; i < sorted.length - 1; i++) {
    for (let j = i; j >= 0; j--) {
      const current = sorted[j]!;
      const next = sorted[j + 1]!;
      if (Math.abs(next.top - current.top) >= SAME_ROW_PIXELS || next.left >= current.left) break;
      sorted[j] = next;
      sorted[j + 1] = current;
    }
  }
  return sorted;
}
