import type { ExecutionProvider, SessionFactory } from "../inference/types.ts";
import { type LoadedPipeline, type ModelConfig, resolveModel } from "../pipelines/index.ts";
import { ModelConfigError, wantsTensorrt } from "../pipelines/model-config.ts";
import {
  type ProviderSelection,
  probeProvider,
  selectProvider,
  sessionFactory,
} from "./providers.ts";

export interface LoadModelsOptions {
  /** Models loaded now, in order (may be none: the provider is then chosen by the probe). */
  models: readonly string[];
  /** Models the runner may be asked for later: an unknown one fails the start too. */
  serves?: readonly string[];
  configs?: Readonly<Record<string, ModelConfig>>;
  providers: readonly ExecutionProvider[];
  threads: number;
  /** The CUDA device the sessions open on (a GPU of a multi-GPU host). */
  deviceId?: number;
  /** CUDA sessions through TensorRT first, for models whose config does not say. */
  tensorrt?: boolean;
  /** How sessions are made on a provider; tests inject failures here. */
  createSessionFactory?: (
    provider: ExecutionProvider,
    threads: number,
    deviceId?: number,
  ) => SessionFactory;
  /** Proves a provider runs at all, even when no model needs onnxruntime (`noop`). */
  probe?: (provider: ExecutionProvider, deviceId?: number) => Promise<void>;
  /**
   * Asked before each model: false stops loading there (it would not fit; the first model
   * loads whatever the answer). The rest load when a job needs them.
   */
  before?(model: string): Promise<boolean>;
  /** Told of each model once loaded and warmed: false unloads it again and stops there. */
  after?(model: string, pipeline: LoadedPipeline): Promise<boolean>;
}

/** Model ids that neither a config nor a built-in pipeline names. */
export class UnknownModelError extends Error {
  constructor(readonly models: readonly string[]) {
    super(`unknown model(s): ${models.join(", ")}`);
    this.name = "UnknownModelError";
  }
}

/** One model, loaded and warmed on `provider`; an unknown id throws `UnknownModelError`. */
export async function loadModel(
  model: string,
  options: {
    provider: ExecutionProvider;
    threads: number;
    createSession: SessionFactory;
    configs?: Readonly<Record<string, ModelConfig>> | undefined;
    tensorrt?: boolean | undefined;
  },
): Promise<LoadedPipeline> {
  const found = resolveModel(model, options.configs);
  if (!found) throw new UnknownModelError([model]);
  const extras = { tensorrt: wantsTensorrt(found.config, options.tensorrt) };
  const pipeline = await found.pipeline.load({
    provider: options.provider,
    threads: options.threads,
    createSession: (modelPath) =>
      options.createSession(modelPath, extras).catch((error: unknown) => {
        throw unreadable(model, modelPath, error);
      }),
    modelId: model,
    ...(found.config ? { config: found.config } : {}),
  });
  try {
    await pipeline.warm();
  } catch (error) {
    await pipeline.release().catch(() => {});
    throw error;
  }
  return pipeline;
}

/**
 * onnxruntime's "Load model from <path> failed: …" is the file itself (not ONNX, truncated,
 * an opset this onnxruntime lacks): it parses the graph before any provider is involved, so
 * no other provider and no retry can load it. Running out of memory while reading it is
 * the host's state, not the file's, and stays an ordinary failure, retried.
 */
function unreadable(model: string, path: string, error: unknown): unknown {
  const message = error instanceof Error ? error.message : String(error);
  if (!/^Load model from .* failed:/.test(message) || /alloc|memory/i.test(message)) return error;
  const why = message.replace(/^Load model from .* failed:\s*/, "");
  return new ModelConfigError(`model ${model}: onnxruntime cannot load ${path}: ${why}`);
}

/**
 * Loads and warms the models on the first execution provider where all of them load and
 * warm (`cuda` then `cpu`). Missing CUDA libraries, a driver that will not initialise or a
 * warm-up that runs out of memory all count as that provider failing; each reason is kept
 * for the operator.
 */
export async function loadModels(
  options: LoadModelsOptions,
): Promise<ProviderSelection<Map<string, LoadedPipeline>>> {
  const all = [...new Set([...options.models, ...(options.serves ?? [])])];
  const unknown = all.filter((model) => !resolveModel(model, options.configs));
  if (unknown.length > 0) throw new UnknownModelError(unknown);
  const probe = options.probe ?? probeProvider;
  const makeFactory = options.createSessionFactory ?? sessionFactory;

  return selectProvider(options.providers, async (provider) => {
    await probe(provider, options.deviceId);
    const createSession = makeFactory(provider, options.threads, options.deviceId);
    const loaded = new Map<string, LoadedPipeline>();
    try {
      for (const model of options.models) {
        if (options.before && !(await options.before(model)) && loaded.size > 0) break;
        const pipeline = await loadModel(model, { ...options, provider, createSession });
        if (options.after && !(await options.after(model, pipeline))) {
          await pipeline.release();
          break;
        }
        loaded.set(model, pipeline);
      }
      return loaded;
    } catch (error) {
      await Promise.allSettled([...loaded.values()].map((pipeline) => pipeline.release()));
      throw error;
    }
  });
}
