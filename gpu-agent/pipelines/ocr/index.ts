import type { RunRequest } from "../../runner/types.ts";
import { type LoadedPipeline, type PipelineDefinition, permanentFailure } from "../pipeline.ts";
import { OcrEngine } from "./engine.ts";

export type { OcrLine, OcrOutput, Quad } from "./engine.ts";
export { OcrEngine } from "./engine.ts";

/** PaddleOCR PP-OCRv4 (detection + recognition) on the job's `image` input. */
export const ocrPipeline: PipelineDefinition = {
  id: "ocr",
  async load({ createSession }): Promise<LoadedPipeline> {
    const engine = await OcrEngine.load(createSession);
    return {
      run: async (request) => engine.recognize(imageInput(request)),
      warm: () => engine.warm(),
      release: () => engine.release(),
    };
  },
};

/** The image to read: the `image` input, or the only input when it is named otherwise. */
function imageInput(request: RunRequest): Uint8Array {
  const named = request.files.image;
  if (named) return named.bytes;
  const all = Object.values(request.files);
  if (all.length === 1) return all[0]!.bytes;
  throw permanentFailure(
    "missing_input",
    all.length === 0
      ? "the ocr model needs an image input named `image`"
      : "the ocr model reads one image; name it `image`",
  );
}
