import { backgroundRemovalPipeline } from "./background-removal/index.ts";
import { classificationPipeline } from "./classification/index.ts";
import { detectionPipeline } from "./detection/index.ts";
import type { ModelConfig } from "./model-config.ts";
import { noopPipeline } from "./noop.ts";
import { ocrPipeline } from "./ocr/index.ts";
import type { PipelineDefinition } from "./pipeline.ts";
import { tensorPipeline } from "./tensor/index.ts";

export type { ModelConfig } from "./model-config.ts";
export type { LoadedPipeline, PipelineDefinition, PipelineLoadOptions } from "./pipeline.ts";
export {
  OutputWithArtifacts,
  PipelineFailure,
  permanentFailure,
  transientFailure,
} from "./pipeline.ts";

/** Every pipeline an agent can run. The runner child knows models only through this map. */
export const pipelines: ReadonlyMap<string, PipelineDefinition> = new Map(
  [
    noopPipeline,
    ocrPipeline,
    backgroundRemovalPipeline,
    detectionPipeline,
    classificationPipeline,
    tensorPipeline,
  ].map((pipeline) => [pipeline.id, pipeline]),
);

export function findPipeline(pipelineId: string): PipelineDefinition | undefined {
  return pipelines.get(pipelineId);
}

/** The model ids that run without a config: `noop`, `ocr`. */
export const modelIds: readonly string[] = [...pipelines.values()]
  .filter((pipeline) => pipeline.builtin)
  .map((pipeline) => pipeline.id);

/** A model id resolved to the pipeline that runs it and the config it loads with. */
export interface ResolvedModel {
  modelId: string;
  pipeline: PipelineDefinition;
  config: ModelConfig | undefined;
}

/**
 * Finds the pipeline for a model id: its config's `pipeline` when the id is configured,
 * else the built-in of that name. Undefined for an id neither names.
 */
export function resolveModel(
  modelId: string,
  configs: Readonly<Record<string, ModelConfig>> = {},
): ResolvedModel | undefined {
  const config = Object.hasOwn(configs, modelId) ? configs[modelId] : undefined;
  const pipeline = config ? pipelines.get(config.pipeline) : pipelines.get(modelId);
  if (!pipeline || (!config && !pipeline.builtin)) return undefined;
  return { modelId, pipeline, config };
}
