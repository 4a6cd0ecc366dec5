import { z } from "zod";
import { pipelineOptions } from "../model-config.ts";
import { imageInput, type LoadedPipeline, type PipelineDefinition } from "../pipeline.ts";
import { OcrEngine } from "./engine.ts";

export type { OcrDetectionOutput, OcrLine, OcrOutput, Quad } from "./engine.ts";
export { OcrEngine } from "./engine.ts";

const Options = z.strictObject({
  /** Find the text boxes only, without reading them: `{ boxes }`. */
  detection_only: z.boolean().default(false),
});

/** PaddleOCR PP-OCRv4 (detection + recognition) on the job's `image` input. */
export const ocrPipeline: PipelineDefinition = {
  id: "ocr",
  builtin: true,
  async load({ createSession, config, modelId = "ocr" }): Promise<LoadedPipeline> {
    const options = pipelineOptions(Options, modelId, config);
    const engine = await OcrEngine.load(createSession);
    return {
      run: async (request) => {
        const image = imageInput(request, "ocr");
        return options.detection_only ? engine.detect(image) : engine.recognize(image);
      },
      warm: () => engine.warm(),
      release: () => engine.release(),
    };
  },
};
