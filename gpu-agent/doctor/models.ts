import type { ExecutionProvider } from "../inference/types.ts";
import { type ModelConfig, wantsTensorrt } from "../pipelines/model-config.ts";
import { type LoadModelsOptions, loadModels } from "../runner/load-models.ts";
import { tensorrtUnavailable } from "../runner/providers.ts";
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
    /** GANTRY_TENSORRT (a model's config overrides it). */
    tensorrt?: boolean;
  },
): Promise<CheckResult> {
  const name = `model ${model}`;
  const started = performance.now();
  const request: LoadModelsOptions = {
    models: [model],
    providers: options.providers,
    threads: options.threads,
    ...(options.configs ? { configs: options.configs } : {}),
    ...(options.tensorrt ? { tensorrt: options.tensorrt } : {}),
  };
  try {
    const selection = await (options.load ?? loadModels)(request);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    await Promise.allSettled([...selection.value.values()].map((pipeline) => pipeline.release()));
    const skipped = selection.attempts.filter((attempt) => !attempt.ok);
    const note = skipped.length
      ? ` (${skipped.map((attempt) => attempt.provider).join(", ")} unavailable)`
      : "";
    const tensorrt =
      selection.provider === "cuda" && wantsTensorrt(options.configs?.[model], options.tensorrt);
    const withoutTensorrt = tensorrt ? tensorrtUnavailable() : null;
    const on = tensorrt && !withoutTensorrt ? "TensorRT and cuda" : selection.provider;
    return {
      name,
      status: withoutTensorrt ? "warn" : "pass",
      detail: `loaded and warmed on ${on} in ${seconds} s${note}${withoutTensorrt ? `; TensorRT unavailable, on CUDA alone: ${withoutTensorrt}` : ""}`,
      ...(withoutTensorrt
        ? { hint: "install TensorRT 10 for CUDA 12 (libnvinfer), or set GANTRY_TENSORRT=false" }
        : {}),
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
