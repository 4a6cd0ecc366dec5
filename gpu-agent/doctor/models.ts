import type { ExecutionProvider } from "../inference/types.ts";
import type { ModelConfig } from "../pipelines/model-config.ts";
import { type LoadModelsOptions, loadModels } from "../runner/load-models.ts";
import { type CheckResult, errorText } from "./report.ts";

export type LoadModelsFn = typeof loadModels;

/**
 * Loads and warms one model the way a runner does (same provider order, same warm-up), so
 * a model that would fail the agent's start fails here, with the reason per provider.
 */
export async function modelCheck(
  model: string,
  options: {
    providers: readonly ExecutionProvider[];
    threads: number;
    configs?: Readonly<Record<string, ModelConfig>>;
    load?: LoadModelsFn;
  },
): Promise<CheckResult> {
  const name = `model ${model}`;
  const started = performance.now();
  const request: LoadModelsOptions = {
    models: [model],
    providers: options.providers,
    threads: options.threads,
    ...(options.configs ? { configs: options.configs } : {}),
  };
  try {
    const selection = await (options.load ?? loadModels)(request);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    await Promise.allSettled([...selection.value.values()].map((pipeline) => pipeline.release()));
    const skipped = selection.attempts.filter((attempt) => !attempt.ok);
    const note = skipped.length
      ? ` (${skipped.map((attempt) => attempt.provider).join(", ")} unavailable)`
      : "";
    return {
      name,
      status: "pass",
      detail: `loaded and warmed on ${selection.provider} in ${seconds} s${note}`,
    };
  } catch (error) {
    return {
      name,
      status: "fail",
      detail: `cannot load: ${errorText(error)}`,
      hint: "check the model's entry in models.yaml and GANTRY_MODELS",
    };
  }
}
