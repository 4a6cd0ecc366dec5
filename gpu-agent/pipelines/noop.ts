import { setTimeout as sleep } from "node:timers/promises";
import { noopTask } from "../../shared/tasks/noop.ts";
import { OUT_OF_MEMORY_SAMPLE } from "../inference/oom.ts";
import type { RunRequest } from "../inference/types.ts";
import {
  type LoadedPipeline,
  type PipelineDefinition,
  permanentFailure,
  reportProgress,
  taskParams,
  transientFailure,
} from "./pipeline.ts";

/** Set by the runner in its child's environment: only there may `crash` end the process. */
export const RUNNER_CHILD_ENV = "GANTRY_RUNNER_CHILD";

/**
 * Echoes `params` back after an optional delay. No inference. Batches (for tests of the
 * batching path) when its model config sets `max_batch`.
 */
export const noopPipeline: PipelineDefinition = {
  id: noopTask.id,
  builtin: noopTask.builtin,
  async load({ config }): Promise<LoadedPipeline> {
    const maxBatch = config?.max_batch ?? 1;
    return {
      run: (request) => runNoop(request, 1),
      maxBatch,
      async runBatch(requests) {
        return Promise.allSettled(requests.map((request) => runNoop(request, requests.length)));
      },
      async warm() {},
      async release() {},
    };
  },
};

async function runNoop(request: RunRequest, batchSize: number): Promise<unknown> {
  const params = taskParams(noopTask.params, request);
  const { delay_ms: delayMs, block_ms: blockMs, fail, crash, oom_if_batch_over: oomOver } = params;
  if (crash) {
    // Outside a runner child (a test calling the pipeline in-process) exiting would take
    // the test runner down with it.
    if (process.env[RUNNER_CHILD_ENV] !== "1") {
      throw transientFailure("noop_failed", "noop crashes only inside a runner child");
    }
    process.exit(70);
  }
  if (blockMs) blockEventLoop(blockMs);
  if (oomOver !== undefined && batchSize > oomOver) throw new Error(OUT_OF_MEMORY_SAMPLE);
  if (delayMs) await sleepReporting(request, delayMs, params.progress_every_ms);
  if (fail === "permanent") {
    throw permanentFailure("noop_failed", "noop was asked to fail permanently");
  }
  if (fail === "transient") {
    throw transientFailure("noop_failed", "noop was asked to fail transiently");
  }
  return request.params;
}

/**
 * A stuck device call: nothing in the child runs (no timer, no IPC, no SIGTERM handler)
 * until it returns, so only SIGKILL ends it. In-process (a test) it would freeze the caller.
 */
function blockEventLoop(ms: number): void {
  if (process.env[RUNNER_CHILD_ENV] !== "1") {
    throw transientFailure("noop_failed", "noop blocks only inside a runner child");
  }
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Sleeps `ms`, reporting how much of it has passed every `everyMs` when asked. */
async function sleepReporting(request: RunRequest, ms: number, everyMs?: number): Promise<void> {
  if (!everyMs) return sleep(ms);
  const started = performance.now();
  const report = () => {
    const slept = Math.min(ms, performance.now() - started);
    const message = `${Math.round(slept)} of ${ms} ms`;
    reportProgress(request, { fraction: slept / ms, stage: "sleeping", message });
  };
  report();
  const timer = setInterval(report, everyMs);
  try {
    await sleep(ms);
    report();
  } finally {
    clearInterval(timer);
  }
}
