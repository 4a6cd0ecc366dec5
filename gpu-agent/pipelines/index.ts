import { noopPipeline } from "./noop.ts";
import { ocrPipeline } from "./ocr/index.ts";
import type { PipelineDefinition } from "./pipeline.ts";

export type { LoadedPipeline, PipelineDefinition, PipelineLoadOptions } from "./pipeline.ts";
export { PipelineFailure, permanentFailure, transientFailure } from "./pipeline.ts";

/** Every model id an agent can serve. The runner child knows models only through this map. */
export const pipelines: ReadonlyMap<string, PipelineDefinition> = new Map(
  [noopPipeline, ocrPipeline].map((pipeline) => [pipeline.id, pipeline]),
);

export function findPipeline(modelId: string): PipelineDefinition | undefined {
  return pipelines.get(modelId);
}

export const modelIds: readonly string[] = [...pipelines.keys()];
