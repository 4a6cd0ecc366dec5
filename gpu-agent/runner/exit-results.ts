import { RUNNER_LOST_CODE, RUNNER_RECYCLED_CODE } from "../inference/oom.ts";
import type { RunResult } from "../inference/types.ts";
import type { ModelConfig } from "../pipelines/model-config.ts";
import type { PendingRun } from "./child-events.ts";
import { RunnerStartError } from "./child-process.ts";
import { timeoutResult } from "./run-timeout.ts";

export function failure(code: string, text: string): Extract<RunResult, { ok: false }> {
  return { ok: false, error: { type: "transient", code, message: text } };
}

/**
 * What a run gets when its child exits under it (`how`: "signal SIGKILL", "exit code 70").
 * The child runs its batches in the order sent, so the oldest pending one was on the device:
 * it is blamed for a crash. The ones behind it (`lost`), and every run of a child replaced
 * on purpose or stopped, did nothing wrong.
 */
export function exitResult(
  why: "stopped" | "replaced" | "crashed" | "lost",
  how: string,
): RunResult {
  switch (why) {
    case "stopped":
      return failure("runner_stopped", "the runner was stopped during the run");
    case "replaced":
      return failure(RUNNER_RECYCLED_CODE, "the runner child was replaced before the run finished");
    case "crashed":
      return failure("runner_crashed", `the runner child died during the run (${how})`);
    case "lost":
      return failure(RUNNER_LOST_CODE, `the runner child died (${how}) before this run's turn`);
  }
}

/** A start no retry fixes: the child's own permanent load error (an unknown model). */
export const isPermanentStartError = (error: unknown) =>
  error instanceof RunnerStartError && error.jobError.type === "permanent";

/** Settles every run a child held when it exited (see `exitResult` for who is blamed). */
export function settleExited(
  pending: Iterable<PendingRun>,
  state: { stopping: boolean; retiring: boolean; how: string },
  configs: Readonly<Record<string, ModelConfig>> | undefined,
): void {
  let first = true;
  for (const run of pending) {
    const why = state.stopping
      ? "stopped"
      : state.retiring
        ? "replaced"
        : first
          ? "crashed"
          : "lost";
    const result = run.timedOut
      ? timeoutResult(run.model, run.timeoutSeconds, configs)
      : exitResult(why, state.how);
    run.settle(Array(run.count).fill(result));
    first = false;
  }
}
