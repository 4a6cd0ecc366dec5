import type { ReadyMessage, ResultMessage } from "./child-protocol.ts";
import type { RunnerBatchStats, RunnerLogger } from "./types.ts";

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
