import type { JobError } from "../../shared/protocol/index.ts";
import { ModelLoadError } from "./child-model-calls.ts";
import { NO_ROOM, OVERSIZED_MODEL, type Runner, type RunnerLogger } from "./types.ts";

export interface PlacementOptions {
  /** The memory (MiB) each runner's models may take; absent: no limit. */
  budgetMb?: (runner: number) => number | undefined;
  /** A model's size before it was ever loaded here (models.yaml's `memory_mb`). */
  declaredMb?: (model: string) => number | undefined;
  /** Models never unloaded (GANTRY_PRELOAD). */
  pinned?: readonly string[];
  logger?: RunnerLogger;
  now?: () => number;
}

/** Why a model could not be made ready on a runner, as a job's error. */
export function loadFailure(error: unknown): JobError {
  if (error instanceof ModelLoadError) return error.jobError;
  const message = error instanceof Error ? error.message : String(error);
  return { type: "transient", code: "model_load_failed", message };
}

/**
 * Which models each runner holds, loaded on demand within its memory budget. Before a batch
 * runs, `acquire` loads its model if the runner lacks it, first unloading the runner's idle
 * models, least recently used first, until the model fits (its size known from models.yaml
 * or from an earlier load; measured after the load otherwise, and room made then). A model
 * larger than the whole budget is loaded alone, with a warning. A model some batch is using
 * (`acquire`d and not yet `release`d) or a pinned one is never unloaded. Runners that cannot
 * load on demand hold every model from the start.
 */
export class ModelPlacement {
  private readonly lastUsed: Map<string, number>[];
  private readonly inUse: Map<string, number>[];
  /** Models being unloaded now: no batch may count on them. */
  private readonly leaving: Set<string>[];
  /** One load (with its unloads) at a time per runner. */
  private readonly turns: Promise<unknown>[];
  /** What each model took when last loaded (MiB), on any runner. */
  private readonly sizes = new Map<string, number>();
  private readonly pinned: ReadonlySet<string>;
  private readonly now: () => number;
  private loads = 0;

  constructor(
    private readonly runners: readonly Runner[],
    private readonly options: PlacementOptions = {},
  ) {
    this.lastUsed = runners.map(() => new Map());
    this.inUse = runners.map(() => new Map());
    this.leaving = runners.map(() => new Set());
    this.turns = runners.map(() => Promise.resolve());
    this.pinned = new Set(options.pinned ?? []);
    this.now = options.now ?? (() => performance.now());
  }

  /** Models loaded (so far) on demand, on every runner. */
  get loadCount(): number {
    return this.loads;
  }

  /** Whether `model` is loaded on runner `index` now: a batch of it starts at once. */
  isWarm(index: number, model: string): boolean {
    const loaded = this.runners[index]?.loadedModels?.();
    return loaded ? loaded.has(model) && !this.leaving[index]!.has(model) : true;
  }

  /** The models loaded on runner `index` (empty for a runner that does not say). */
  loaded(index: number): string[] {
    return [...(this.runners[index]?.loadedModels?.().keys() ?? [])];
  }

  /**
   * Readies `model` on runner `index` for a batch, and holds it loaded until `release`.
   * Resolves with how long the batch waited for a load (ms; 0 when it was loaded); rejects
   * when it could not be loaded (the hold is then already released).
   */
  /**
   * Readies `model` on runner `index` for a batch, and holds it loaded until `release`:
   * 0 at once when it is loaded, else a promise of how long the batch waited for the load
   * (ms), rejected when it could not be loaded (the hold then already released).
   */
  acquire(index: number, model: string): number | Promise<number> {
    const inUse = this.inUse[index]!;
    inUse.set(model, (inUse.get(model) ?? 0) + 1);
    this.lastUsed[index]!.set(model, this.now());
    // Warm: the batch starts now, in this turn (no promise in between).
    if (this.isWarm(index, model) || !this.runners[index]!.loadModel) return 0;
    return this.loadFor(index, model);
  }

  private async loadFor(index: number, model: string): Promise<number> {
    const started = this.now();
    const turn = this.turns[index]!.then(() => this.load(index, model));
    this.turns[index] = turn.catch(() => {});
    try {
      await turn;
      return this.now() - started;
    } catch (error) {
      this.release(index, model);
      throw error;
    }
  }

  release(index: number, model: string): void {
    const inUse = this.inUse[index]!;
    const count = (inUse.get(model) ?? 1) - 1;
    if (count > 0) inUse.set(model, count);
    else inUse.delete(model);
    this.lastUsed[index]!.set(model, this.now());
  }

  private async load(index: number, model: string): Promise<void> {
    if (this.isWarm(index, model)) return;
    const runner = this.runners[index]!;
    const budget = this.options.budgetMb?.(index);
    const known = this.sizes.get(model) ?? this.options.declaredMb?.(model);
    if (known !== undefined) this.warnOversized(index, model, known, budget);
    await this.makeRoom(index, model, known ?? 0, budget);
    const { memoryMb } = await runner.loadModel!(model);
    this.loads++;
    this.sizes.set(model, memoryMb);
    if (known === undefined) this.warnOversized(index, model, memoryMb, budget);
    // Measured only now: what it turned out to take is made room for after the fact.
    const over = await this.makeRoom(index, model, 0, budget);
    // Room the model itself would fit in, but what cannot be unloaded holds it: said once.
    if (over !== null && budget !== undefined && memoryMb <= budget) {
      this.options.logger?.warn(
        {
          runner: index,
          model,
          used_mb: over,
          budget_mb: budget,
          kept: this.loaded(index)
            .filter((m) => m !== model)
            .sort(),
        },
        NO_ROOM,
      );
    }
    this.options.logger?.info(
      { runner: index, model, memory_mb: memoryMb, loaded: this.loaded(index) },
      "model loaded",
    );
  }

  /**
   * Unloads idle models, least recently used first, until `needMb` more fits the budget.
   * Null once it fits; else what the runner's models take, none of them left to unload.
   */
  private async makeRoom(
    index: number,
    model: string,
    needMb: number,
    budget?: number,
  ): Promise<number | null> {
    if (budget === undefined) return null;
    const runner = this.runners[index]!;
    const tried = new Set<string>();
    for (;;) {
      const loaded = runner.loadedModels?.() ?? new Map<string, number>();
      let used = needMb;
      for (const mb of loaded.values()) used += mb;
      if (used <= budget) return null;
      const idle = [...loaded.keys()]
        .filter((m) => m !== model && !tried.has(m))
        .filter((m) => !this.inUse[index]!.has(m) && !this.pinned.has(m))
        .sort((a, b) => (this.lastUsed[index]!.get(a) ?? 0) - (this.lastUsed[index]!.get(b) ?? 0));
      const victim = idle[0];
      if (victim === undefined) return used;
      tried.add(victim);
      this.leaving[index]!.add(victim);
      try {
        await runner.unloadModel?.(victim);
      } finally {
        this.leaving[index]!.delete(victim);
      }
      this.options.logger?.info(
        { runner: index, model: victim, for_model: model, budget_mb: budget },
        "model unloaded to make room",
      );
    }
  }

  private warnOversized(index: number, model: string, memoryMb: number, budget?: number): void {
    if (budget === undefined || memoryMb <= budget) return;
    this.options.logger?.warn(
      { runner: index, model, memory_mb: memoryMb, budget_mb: budget },
      OVERSIZED_MODEL,
    );
  }
}
