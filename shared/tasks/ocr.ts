import { z } from "zod";
import { imageTask, Unit } from "./task.ts";

const Point = z.tuple([z.number(), z.number()]);
/** Four corners, clockwise from the top-left, in original image pixels. */
export const Quad = z.tuple([Point, Point, Point, Point]);
export type Quad = z.infer<typeof Quad>;

export const OcrLine = z.object({
  text: z.string(),
  /** Mean character confidence. */
  score: Unit,
  box: Quad,
});
export type OcrLine = z.infer<typeof OcrLine>;

/** The `ocr` model's job output. */
export const OcrOutput = z.object({
  /** Every line's text, top to bottom, joined with "\n". */
  text: z.string(),
  lines: z.array(OcrLine),
});
export type OcrOutput = z.infer<typeof OcrOutput>;

/** A model with `detection_only: true`: where the text is, in reading order, unread. */
export const OcrDetectionOutput = z.object({ boxes: z.array(Quad) });
export type OcrDetectionOutput = z.infer<typeof OcrDetectionOutput>;

export const ocrTask = imageTask({
  id: "ocr",
  description: "PaddleOCR PP-OCRv4 text detection and recognition. Output: {text, lines}.",
  params: z.strictObject({
    lang: z
      .enum(["en"])
      .optional()
      .describe("Recognition language. Only English models ship; the default."),
  }),
  artifacts: [],
  output: z.union([OcrOutput, OcrDetectionOutput]),
  builtin: true,
  defaultTimeoutSeconds: 120,
});
