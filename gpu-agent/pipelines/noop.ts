import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { OUT_OF_MEMORY_SAMPLE } from "../inference/oom.ts";
import type { RunRequest } from "../inference/types.ts";
import {
  type LoadedPipeline,
  type PipelineDefinition,
  permanentFailure,
  transientFailure,
} from "./pipeline.ts";

/**
 * The parameters `noop` understands; any other keys are echoed untouched. `fail`, `crash`
 * and `oom_if_batch_over` let tests and operators drive the retry, poison and out-of-memory
 * paths without a GPU or a real model.
 */
const NoopParams = z.looseObject({
  delay_ms: z.number().int().min(0).max(60_000).optional(),
  fail: z.enum(["permanent", "transient"]).optional(),
  /** Kill the runner child mid-run, as a CUDA fault or a native abort would. */
  crash: z.boolean().optional(),
  /** Fail with onnxruntime's out-of-memory message when the batch holds more jobs than this. */
  oom_if_batch_over: z.number().int().min(0).optional(),
});

/** Set by the runner in its child's environment: only there may `crash` end the process. */
export const RUNNER_CHILD_ENV = "GANTRY_RUNNER_CHILD";

/**
 * Echoes `params` back after an optional delay. No inference. Batches (for tests of the
 * batching path) when its model config sets `max_batch`.
 */
export const noopPipeline: PipelineDefinition = {
  id: "noop",
  builtin: true,
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
  const parsed = NoopParams.safeParse(request.params);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join(".") || "params";
    throw permanentFailure("invalid_params", `${where}: ${issue?.message ?? "invalid"}`);
  }
  const { delay_ms: delayMs, fail, crash, oom_if_batch_over: oomOver } = parsed.data;
  if (crash) {
    // Outside a runner child (a test calling the pipeline in-process) exiting would take
    // the test runner down with it.
    if (process.env[RUNNER_CHILD_ENV] !== "1") {
      throw transientFailure("noop_failed", "noop crashes only inside a runner child");
    }
    process.exit(70);
  }
  if (oomOver !== undefined && batchSize > oomOver) throw new Error(OUT_OF_MEMORY_SAMPLE);
  if (delayMs) await sleep(delayMs);
  if (fail === "permanent") {
    throw permanentFailure("noop_failed", "noop was asked to fail permanently");
  }
  if (fail === "transient") {
    throw transientFailure("noop_failed", "noop was asked to fail transiently");
  }
  return request.params;
}
