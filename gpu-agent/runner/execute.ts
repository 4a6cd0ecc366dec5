import type { JobError } from "../../shared/protocol/index.ts";
import { type LoadedPipeline, OutputWithArtifacts, PipelineFailure } from "../pipelines/index.ts";
import { isOutOfMemory, OUT_OF_MEMORY_CODE } from "./oom.ts";
import { errorMessage } from "./providers.ts";
import type { RunRequest, RunResult } from "./types.ts";

/**
 * Runs requests of one model: as one batch when there are several and the pipeline batches,
 * else one after another. Every request gets its own result; nothing here throws.
 */
export async function executeBatch(
  pipeline: LoadedPipeline,
  requests: readonly RunRequest[],
): Promise<RunResult[]> {
  if (requests.length > 1 && pipeline.runBatch) {
    try {
      return (await pipeline.runBatch(requests)).map(toRunResult);
    } catch (error) {
      const failed = toRunResult({ status: "rejected", reason: error });
      return requests.map(() => failed);
    }
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
