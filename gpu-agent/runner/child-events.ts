import type { RunResult } from "../inference/types.ts";
import type { LoadMessage, ReadyMessage, ResultMessage } from "./child-protocol.ts";
import type { TimedRun } from "./run-timeout.ts";
import type { RunnerBatchStats, RunnerLogger, RunnerOptions } from "./types.ts";

/** A batch sent to the child, until its results come back or the child exits. */
export interface PendingRun extends TimedRun {
  count: number;
  model: string;
  sentAt: number;
  settle(results: RunResult[]): void;
}

/** What a new child is told to load: `first` (when not empty), or its start-up models. */
export function loadMessage(options: RunnerOptions, first?: readonly string[]): LoadMessage {
  const { models, threads, providers, modelConfigs, preload, memoryBudgetMb, gpu, tensorrt } =
    options;
  // A successor started with `first` (the model that ran out of memory) keeps to the budget.
  const keepAll = options.pinPreload === true && !first?.length;
  return {
    v: 1,
    type: "load",
    models: [...(first?.length ? first : (preload ?? models))],
    threads,
    providers: [...providers],
    ...(modelConfigs ? { configs: { ...modelConfigs } } : {}),
    serves: [...models],
    ...(gpu ? { deviceId: gpu.cudaDeviceId } : {}),
    ...(memoryBudgetMb === undefined ? {} : { budgetMb: memoryBudgetMb }),
    ...(keepAll ? { keepAll } : {}),
    ...(tensorrt ? { tensorrt } : {}),
  };
}

export const errorText = (error: unknown): string =>
  error instanceof Error ? error.message : String(error);

/** The runner's log line for a child that has loaded its models. */
export function logReady(logger: RunnerLogger, msg: ReadyMessage, pid: number | undefined): void {
  const fellBack = msg.attempts.filter((attempt) => !attempt.ok);
  logger.info(
    {
      child_pid: pid,
      provider: msg.provider,
      models: msg.models,
      max_batch: msg.maxBatch,
      load_ms: Math.round(msg.loadMs),
      ...(fellBack.length > 0 ? { unavailable: fellBack } : {}),
    },
    `runner ready on execution provider ${msg.provider}`,
  );
}

/** Where a batch's time went, from its send and the child's answer. */
export function batchStats(
  run: { model: string; count: number; sentAt: number },
  msg: ResultMessage,
): RunnerBatchStats {
  return {
    model: run.model,
    size: run.count,
    roundTripMs: performance.now() - run.sentAt,
    childMs: msg.durationMs,
    ...(msg.timings ? { timings: msg.timings } : {}),
  };
}
