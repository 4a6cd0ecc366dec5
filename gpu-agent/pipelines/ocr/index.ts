import { z } from "zod";
import { ocrTask } from "../../../shared/tasks/ocr.ts";
import type { RunRequest } from "../../inference/types.ts";
import { pipelineOptions } from "../model-config.ts";
import {
  imageInput,
  type LoadedPipeline,
  type PipelineDefinition,
  reportProgress,
  taskParams,
} from "../pipeline.ts";
import type { DetectionInput } from "./detect.ts";
import { OcrEngine } from "./engine.ts";

export type { OcrDetectionOutput, OcrLine, OcrOutput, Quad } from "./engine.ts";
export { OcrEngine } from "./engine.ts";

const Options = z.strictObject({
  /** Find the text boxes only, without reading them: `{ boxes }`. */
  detection_only: z.boolean().default(false),
});

/** PaddleOCR PP-OCRv4 (detection + recognition) on the job's `image` input. */
export const ocrPipeline: PipelineDefinition = {
  id: ocrTask.id,
  builtin: ocrTask.builtin,
  async load({ createSession, config, modelId = "ocr" }): Promise<LoadedPipeline> {
    const options = pipelineOptions(Options, modelId, config);
    const engine = await OcrEngine.load(createSession);
    const finish = (input: DetectionInput, request: RunRequest) =>
      options.detection_only
        ? engine.detectPrepared(input)
        : engine.recognizePrepared(input, (report) => reportProgress(request, report));
    // `lang` has one value, English, so the parameters are only checked.
    const prepare = async (request: RunRequest) => {
      taskParams(ocrTask.params, request);
      return engine.prepare(imageInput(request, "ocr"));
    };
    return {
      run: async (request) => finish(await prepare(request), request),
      // Decoding the next image overlaps this one's inference; one request per batch.
      async prepareBatch(requests) {
        const prepared = await Promise.allSettled(requests.map(prepare));
        return {
          run: async () => {
            const results: PromiseSettledResult<unknown>[] = [];
            // One item after another, each reporting its own progress.
            for (const [i, input] of prepared.entries()) {
              if (input.status === "rejected") results.push(input);
              else results.push(...(await Promise.allSettled([finish(input.value, requests[i]!)])));
            }
            return results;
          },
        };
      },
      warm: () => engine.warm(),
      release: () => engine.release(),
    };
  },
};
