import type { ProgressReport } from "../../../shared/protocol/index.ts";
import type { OcrDetectionOutput, OcrLine, OcrOutput, Quad } from "../../../shared/tasks/ocr.ts";
import type { ModelSession, SessionFactory } from "../../inference/types.ts";
import { loadCharset, ocrAssetPaths } from "./assets.ts";
import type { Rect } from "./db-postprocess.ts";
import { type DetectionInput, detectPrepared, detectText, prepareDetection } from "./detect.ts";
import { cropRgb, decodeImage, type RgbImage, rotateCounterClockwise } from "./image.ts";
import { mergeRowNeighbours, recognitionRegion, sortReadingOrder } from "./layout.ts";
import { recognizeLines } from "./recognize.ts";

export type { OcrDetectionOutput, OcrLine, OcrOutput, Quad };

/** Lines the recogniser is less sure of than this are dropped (PaddleOCR's drop_score). */
const MIN_LINE_SCORE = 0.5;
/** The share of an OCR run's progress that detection stands for; recognition is the rest. */
const DETECTION_SHARE = 0.2;
/** PaddleOCR turns crops at least this much taller than wide upright before reading. */
const TALL_CROP_RATIO = 1.5;

/** PP-OCRv4 detection and recognition, loaded once and reused for every image. */
export class OcrEngine {
  private constructor(
    private readonly detector: ModelSession,
    private readonly recognizer: ModelSession,
    private readonly charset: readonly string[],
  ) {}

  static async load(createSession: SessionFactory): Promise<OcrEngine> {
    const paths = ocrAssetPaths();
    const [detector, recognizer, charset] = await Promise.all([
      createSession(paths.detectionModel),
      createSession(paths.recognitionModel),
      loadCharset(paths.dictionary),
    ]);
    return new OcrEngine(detector, recognizer, charset);
  }

  /** Reads the text in an encoded image (JPEG, PNG, …). */
  async recognize(bytes: Uint8Array): Promise<OcrOutput> {
    return this.recognizeDecoded(await decodeImage(bytes));
  }

  /** Finds the text boxes in an encoded image without reading them. */
  async detect(bytes: Uint8Array): Promise<OcrDetectionOutput> {
    return this.detectPrepared(await this.prepare(bytes));
  }

  /** Decodes and resizes for the detector: the CPU part, which may overlap another's inference. */
  async prepare(bytes: Uint8Array): Promise<DetectionInput> {
    return prepareDetection(await decodeImage(bytes));
  }

  async detectPrepared(input: DetectionInput): Promise<OcrDetectionOutput> {
    const boxes = sortReadingOrder(mergeRowNeighbours(await detectPrepared(this.detector, input)));
    return { boxes: boxes.map(toQuad) };
  }

  async recognizeDecoded(image: RgbImage): Promise<OcrOutput> {
    return this.recognizePrepared(await prepareDetection(image));
  }

  /**
   * Detection, then recognition of every box: the device part of OCR. `progress` hears of
   * both stages: `detection` at 0, then `recognition` from 0.2 (detection done) to 1 as
   * the lines are read.
   */
  async recognizePrepared(
    input: DetectionInput,
    progress?: (report: ProgressReport) => void,
  ): Promise<OcrOutput> {
    const { image } = input;
    progress?.({ fraction: 0, stage: "detection" });
    const boxes = sortReadingOrder(mergeRowNeighbours(await detectPrepared(this.detector, input)));
    const crops = boxes.map((box) => cropForRecognition(image, box));
    const reading = (done: number, total: number) =>
      progress?.({
        fraction: total === 0 ? 1 : DETECTION_SHARE + ((1 - DETECTION_SHARE) * done) / total,
        stage: "recognition",
        message: `${done} of ${total} lines`,
      });
    reading(0, crops.length);
    const decoded = await recognizeLines(this.recognizer, crops, this.charset, reading);
    const lines: OcrLine[] = [];
    decoded.forEach(({ text, score }, i) => {
      const trimmed = text.trim();
      if (trimmed === "" || score < MIN_LINE_SCORE) return;
      lines.push({ text: trimmed, score, box: toQuad(boxes[i]!) });
    });
    return { text: lines.map((line) => line.text).join("\n"), lines };
  }

  /** Runs both models once on blank input so the first job does not pay for allocation. */
  async warm(): Promise<void> {
    const blank = (width: number, height: number): RgbImage => ({
      data: new Uint8Array(width * height * 3).fill(255),
      width,
      height,
    });
    await detectText(this.detector, blank(320, 96));
    await recognizeLines(this.recognizer, [blank(160, 48)], this.charset);
  }

  async release(): Promise<void> {
    await Promise.all([this.detector.release(), this.recognizer.release()]);
  }
}

function cropForRecognition(image: RgbImage, box: Rect): RgbImage {
  const region = recognitionRegion(box, image.width, image.height);
  const { left, top, right, bottom } = region;
  const crop = cropRgb(image, left, top, right - left, bottom - top);
  return crop.height / crop.width >= TALL_CROP_RATIO ? rotateCounterClockwise(crop) : crop;
}

function toQuad({ left, top, right, bottom }: Rect): Quad {
  return [
    [left, top],
    [right, top],
    [right, bottom],
    [left, bottom],
  ];
}
