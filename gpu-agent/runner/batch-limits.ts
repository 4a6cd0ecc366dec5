import type { ModelConfig } from "../pipelines/model-config.ts";
import type { BatchPolicy } from "./types.ts";

const DEFAULT_BATCH_WINDOW_MS = 10;

/**
 * A runner's batch policy per model: the largest batch its child reported for the model,
 * lowered for good by out-of-memory errors (the limit outlives the child), and the window.
 */
export class BatchLimits {
  /** Each model's batch limit as the child reported it after loading. */
  private reported: Record<string, number> = {};
  /** Lower limits learnt from running out of memory. */
  private readonly memoryLimits = new Map<string, number>();

  constructor(
    private readonly configs: Readonly<Record<string, ModelConfig>> | undefined,
    private readonly windowMs: number | undefined,
  ) {}

  /** A new child loaded these models (replacing what the last one said). */
  reset(maxBatch: Record<string, number>): void {
    this.reported = { ...maxBatch };
  }

  /** One more model loaded. */
  loaded(model: string, maxBatch: number): void {
    this.reported[model] = maxBatch;
  }

  policy(model: string): BatchPolicy {
    const reported = this.reported[model] ?? 1;
    const windowMs =
      this.configs?.[model]?.batch_window_ms ?? this.windowMs ?? DEFAULT_BATCH_WINDOW_MS;
    return { maxBatch: Math.min(reported, this.memoryLimits.get(model) ?? reported), windowMs };
  }

  /** A batch of `size` ran out of memory: the model's batches halve. Returns the new limit. */
  halve(model: string, size: number): number {
    const limit = Math.max(1, Math.floor(size / 2));
    this.memoryLimits.set(model, Math.min(this.policy(model).maxBatch, limit));
    return this.policy(model).maxBatch;
  }
}
