import type { JobError } from "../../shared/protocol/index.ts";
import { isOutOfMemory, OUT_OF_MEMORY_CODE } from "../inference/oom.ts";
import type { RunRequest, RunResult } from "../inference/types.ts";
import { type LoadedPipeline, OutputWithArtifacts, PipelineFailure } from "../pipelines/index.ts";
import type { BatchTimings } from "./child-protocol.ts";
import { errorMessage } from "./providers.ts";

/**
 * Runs requests of one model on a loaded pipeline; every request gets its own result.
 * `timings`, when given, is filled in with where the run's time went.
 */
export type Executor = (
  pipeline: LoadedPipeline,
  requests: readonly RunRequest[],
  timings?: BatchTimings,
) => Promise<RunResult[]>;

/**
 * An executor for one device. Batches reach it concurrently (the runner sends the next while
 * one runs), but only one is on the device at a time: what a pipeline can do beforehand
 * (`prepareBatch`: decode, resize) runs at once, overlapping the batch on the device, so the
 * device goes from one batch straight to the next. Nothing here throws.
 */
export function createExecutor(): Executor {
  let device: Promise<unknown> = Promise.resolve();
  const onDevice = <T>(work: () => Promise<T>): Promise<T> => {
    const turn = device.then(work);
    device = turn.catch(() => {});
    return turn;
  };

  return async (pipeline, requests, timings) => {
    const started = performance.now();
    let turn = started;
    let ran = started;
    const time = async <T>(work: () => Promise<T>): Promise<T> => {
      turn = performance.now();
      try {
        return await work();
      } finally {
        ran = performance.now();
      }
    };
    try {
      if (pipeline.prepareBatch) {
        const prepared = await pipeline.prepareBatch(requests);
        const ready = performance.now();
        const results = await onDevice(() => time(() => prepared.run()));
        if (timings) {
          const deviceMs = prepared.deviceMs ?? ran - turn;
          Object.assign(timings, {
            prepareMs: ready - started,
            queueMs: turn - ready,
            deviceMs,
            finishMs: Math.max(0, ran - turn - deviceMs),
          } satisfies BatchTimings);
        }
        return results.map(toRunResult);
      }
      const results = await onDevice(() => time(() => runWhole(pipeline, requests)));
      if (timings) {
        // Run whole: preparing and post-processing are inside the device's turn.
        Object.assign(timings, {
          prepareMs: 0,
          queueMs: turn - started,
          deviceMs: ran - turn,
          finishMs: 0,
        } satisfies BatchTimings);
      }
      return results;
    } catch (error) {
      const failed = toRunResult({ status: "rejected", reason: error });
      return requests.map(() => failed);
    }
  };
}

/** As one batch when there are several and the pipeline batches, else one after another. */
async function runWhole(
  pipeline: LoadedPipeline,
  requests: readonly RunRequest[],
): Promise<RunResult[]> {
  if (requests.length > 1 && pipeline.runBatch) {
    return (await pipeline.runBatch(requests)).map(toRunResult);
  }
  const results: RunResult[] = [];
  for (const request of requests) {
    try {
      results.push(toRunResult({ status: "fulfilled", value: await pipeline.run(request) }));
    } catch (error) {
      results.push(toRunResult({ status: "rejected", reason: error }));
    }
  }
  return results;
}

/** A fresh executor per call: for tests and tools that run one batch at a time anyway. */
export const executeBatch: Executor = (pipeline, requests, timings) =>
  createExecutor()(pipeline, requests, timings);

export function toRunResult(outcome: PromiseSettledResult<unknown>): RunResult {
  if (outcome.status === "rejected") return { ok: false, error: classifyError(outcome.reason) };
  const value = outcome.value;
  if (value instanceof OutputWithArtifacts) {
    return { ok: true, output: value.output, artifacts: { ...value.artifacts } };
  }
  return { ok: true, output: value };
}

/**
 * A pipeline's own failures keep their class. Running out of device memory is transient and
 * has its own code, which the runner acts on (smaller batch, fresh child). Anything else is
 * a bug or a device fault that a retry may not meet again: transient.
 */
export function classifyError(error: unknown): JobError {
  if (error instanceof PipelineFailure) return error.jobError;
  const message = errorMessage(error).slice(0, 2000);
  if (isOutOfMemory(error)) return { type: "transient", code: OUT_OF_MEMORY_CODE, message };
  return { type: "transient", code: "inference_failed", message };
}
