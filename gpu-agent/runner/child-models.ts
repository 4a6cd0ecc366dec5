/**
 * The models a runner child holds: loaded at start while they fit, then loaded and unloaded
 * one at a time as the runner (its parent) asks, each with what it takes in memory.
 */
import type { JobError } from "../../shared/protocol/index.ts";
import { gpuMemoryByPid } from "../devices/nvidia-smi.ts";
import type { ExecutionProvider, SessionFactory } from "../inference/types.ts";
import type { LoadedPipeline, ModelConfig } from "../pipelines/index.ts";
import { ModelConfigError } from "../pipelines/model-config.ts";
import type { LoadMessage, ModelReply, ReadyMessage } from "./child-protocol.ts";
import { loadModel, loadModels, UnknownModelError } from "./load-models.ts";
import { errorMessage } from "./providers.ts";
import { OVERSIZED_MODEL, PRELOAD_OVER_BUDGET } from "./types.ts";

export interface ChildModelsOptions {
  /** Sessions on the child's device thread, for a provider and GPU. */
  sessions(provider: ExecutionProvider, threads: number, deviceId?: number): SessionFactory;
  log(level: "info" | "warn" | "error", msg: string, data?: Record<string, unknown>): void;
}

export class ChildModels {
  readonly loaded = new Map<string, LoadedPipeline>();
  readonly memoryMb = new Map<string, number>();
  private provider: ExecutionProvider | null = null;
  private start: LoadMessage | null = null;

  constructor(private readonly options: ChildModelsOptions) {}

  /** Picks the provider and loads the start-up models; the `ready` message, or the error. */
  async begin(message: LoadMessage): Promise<ReadyMessage | JobError> {
    this.start = message;
    const started = performance.now();
    let total = 0;
    let before = 0;
    try {
      const selection = await loadModels({
        models: message.models,
        ...(message.serves ? { serves: message.serves } : {}),
        providers: message.providers,
        threads: message.threads,
        ...(message.deviceId === undefined ? {} : { deviceId: message.deviceId }),
        createSessionFactory: (provider, threads, deviceId) => {
          this.provider = provider;
          return this.options.sessions(provider, threads, deviceId);
        },
        ...(message.configs ? { configs: message.configs } : {}),
        ...(message.tensorrt ? { tensorrt: message.tensorrt } : {}),
        // A model whose declared size would not fit is left for later without loading it.
        before: async (model) => {
          before = await this.used();
          const declared = declaredMb(message.configs?.[model]) ?? 0;
          return message.keepAll === true || this.fits(total + declared);
        },
        after: async (model, _pipeline) => {
          const size = declaredMb(message.configs?.[model]) ?? (await this.used()) - before;
          const mb = Math.max(0, Math.round(size));
          if (!message.keepAll && total > 0 && !this.fits(total + mb)) return false;
          // The first model is kept even when the budget cannot hold it (the runner would
          // serve nothing otherwise), and GANTRY_PRELOAD's all are: said, as a load on demand
          // says it (placement.ts).
          if (!this.fits(total + mb)) {
            this.options.log("warn", total === 0 ? OVERSIZED_MODEL : PRELOAD_OVER_BUDGET, {
              model,
              memory_mb: mb,
              budget_mb: message.budgetMb,
            });
          }
          total += mb;
          this.memoryMb.set(model, mb);
          return true;
        },
      });
      for (const attempt of selection.attempts) {
        if (!attempt.ok) {
          this.options.log(
            "warn",
            `execution provider ${attempt.provider} unavailable: ${attempt.reason}`,
            { provider: attempt.provider },
          );
        }
      }
      this.provider = selection.provider;
      for (const [model, pipeline] of selection.value) this.loaded.set(model, pipeline);
      return {
        v: 1,
        type: "ready",
        provider: selection.provider,
        attempts: selection.attempts,
        models: [...this.loaded.keys()],
        maxBatch: Object.fromEntries(
          [...this.loaded].map(([model, pipeline]) => [model, maxBatchOf(pipeline)]),
        ),
        loadMs: performance.now() - started,
        memoryMb: Object.fromEntries(this.memoryMb),
      };
    } catch (error) {
      if (error instanceof UnknownModelError) {
        return { type: "permanent", code: "unknown_model", message: error.message };
      }
      if (error instanceof ModelConfigError) {
        return { type: "permanent", code: ModelConfigError.code, message: error.message };
      }
      return { type: "transient", code: "model_load_failed", message: errorMessage(error) };
    }
  }

  /** Loads one more model on the provider chosen at start; the reply for the parent. */
  async load(id: number, model: string): Promise<ModelReply> {
    const reply = { v: 1 as const, type: "model_reply" as const, id, model };
    const start = this.start;
    const provider = this.provider;
    if (!start || !provider) {
      return { ...reply, error: failure("model_load_failed", "the child has not started") };
    }
    const existing = this.loaded.get(model);
    if (existing) {
      return { ...reply, memoryMb: this.memoryMb.get(model) ?? 0, maxBatch: maxBatchOf(existing) };
    }
    const started = performance.now();
    const before = await this.used();
    try {
      const pipeline = await loadModel(model, {
        provider,
        threads: start.threads,
        createSession: this.options.sessions(provider, start.threads, start.deviceId),
        configs: start.configs,
        tensorrt: start.tensorrt,
      });
      const measured = Math.max(0, Math.round((await this.used()) - before));
      const mb = declaredMb(start.configs?.[model]) ?? measured;
      this.loaded.set(model, pipeline);
      this.memoryMb.set(model, mb);
      const loadMs = performance.now() - started;
      return { ...reply, memoryMb: mb, maxBatch: maxBatchOf(pipeline), loadMs };
    } catch (error) {
      if (error instanceof UnknownModelError) {
        return {
          ...reply,
          error: { ...failure("unknown_model", error.message), type: "permanent" },
        };
      }
      return { ...reply, error: failure("model_load_failed", errorMessage(error)) };
    }
  }

  /** Releases a model's sessions (nothing runs it: the parent unloads only idle models). */
  async unload(id: number, model: string): Promise<ModelReply> {
    const pipeline = this.loaded.get(model);
    this.loaded.delete(model);
    this.memoryMb.delete(model);
    try {
      await pipeline?.release();
      return { v: 1, type: "model_reply", id, model };
    } catch (error) {
      return {
        v: 1,
        type: "model_reply",
        id,
        model,
        error: failure("unload_failed", errorMessage(error)),
      };
    }
  }

  private fits(mb: number): boolean {
    return this.start?.budgetMb === undefined || mb <= this.start.budgetMb;
  }

  /**
   * Memory this process holds now (MiB): on a GPU what nvidia-smi says it holds there,
   * else (or when it cannot say) the resident set, where CPU sessions keep their weights.
   */
  private async used(): Promise<number> {
    if (this.provider === "cuda") {
      const held = (await gpuMemoryByPid()).get(process.pid);
      if (held !== undefined) return held;
    }
    return process.memoryUsage.rss() / 2 ** 20;
  }
}

const maxBatchOf = (pipeline: LoadedPipeline) => Math.max(1, pipeline.maxBatch ?? 1);

/** The size models.yaml declares for a model (`memory_mb`), if any. */
export function declaredMb(config: ModelConfig | undefined): number | undefined {
  const value = config?.memory_mb;
  return typeof value === "number" ? value : undefined;
}

function failure(code: string, message: string): JobError {
  return { type: "transient", code, message };
}
