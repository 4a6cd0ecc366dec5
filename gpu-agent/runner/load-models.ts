import type { ExecutionProvider, SessionFactory } from "../inference/types.ts";
import { type LoadedPipeline, type ModelConfig, resolveModel } from "../pipelines/index.ts";
import {
  type ProviderSelection,
  probeProvider,
  selectProvider,
  sessionFactory,
} from "./providers.ts";

export interface LoadModelsOptions {
  models: readonly string[];
  configs?: Readonly<Record<string, ModelConfig>>;
  providers: readonly ExecutionProvider[];
  threads: number;
  /** How sessions are made on a provider; tests inject failures here. */
  createSessionFactory?: (provider: ExecutionProvider, threads: number) => SessionFactory;
  /** Proves a provider runs at all, even when no model needs onnxruntime (`noop`). */
  probe?: (provider: ExecutionProvider) => Promise<void>;
}

/** Model ids that neither a config nor a built-in pipeline names. */
export class UnknownModelError extends Error {
  constructor(readonly models: readonly string[]) {
    super(`unknown model(s): ${models.join(", ")}`);
    this.name = "UnknownModelError";
  }
}

/**
 * Loads and warms every model on the first execution provider where all of them load and
 * warm (`cuda` then `cpu`). Missing CUDA libraries, a driver that will not initialise or a
 * warm-up that runs out of memory all count as that provider failing; each reason is kept
 * for the operator.
 */
export async function loadModels(
  options: LoadModelsOptions,
): Promise<ProviderSelection<Map<string, LoadedPipeline>>> {
  const resolved = options.models.map((model) => ({
    model,
    found: resolveModel(model, options.configs),
  }));
  const unknown = resolved.filter(({ found }) => !found).map(({ model }) => model);
  if (unknown.length > 0) throw new UnknownModelError(unknown);
  const probe = options.probe ?? probeProvider;
  const makeFactory = options.createSessionFactory ?? sessionFactory;

  return selectProvider(options.providers, async (provider) => {
    await probe(provider);
    const createSession = makeFactory(provider, options.threads);
    const loaded = new Map<string, LoadedPipeline>();
    try {
      for (const { model, found } of resolved) {
        const pipeline = await found!.pipeline.load({
          provider,
          threads: options.threads,
          createSession,
          modelId: model,
          ...(found!.config ? { config: found!.config } : {}),
        });
        loaded.set(model, pipeline);
        await pipeline.warm();
      }
      return loaded;
    } catch (error) {
      await Promise.allSettled([...loaded.values()].map((pipeline) => pipeline.release()));
      throw error;
    }
  });
}
