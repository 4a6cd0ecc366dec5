import { isOutOfMemory } from "../inference/oom.ts";
import type { RunRequest } from "../inference/types.ts";
import type { LoadedPipeline, PreparedBatch } from "../pipelines/pipeline.ts";

/**
 * A pipeline cut where batching cuts it: `prepare` (decode, resize, normalise: per job),
 * `infer` (the model: once for the whole batch), `finish` (post-processing: per job).
 */
export interface PipelineStages<Prepared, Inferred> {
  /** Turns one request into model input; a throw fails this request alone. */
  prepare(request: RunRequest): Promise<Prepared>;
  /** Runs the model on every prepared request at once; one result per request, in order. */
  infer(items: readonly Prepared[]): Promise<Inferred[]>;
  /** Turns one request's model output into the job output. */
  finish(item: Prepared, inferred: Inferred, request: RunRequest): Promise<unknown> | unknown;
  /**
   * Called once a batch is done with a prepared request (its result is final, no run alone
   * can follow): its buffers may be reused for another.
   */
  release?(item: Prepared): void;
}

/**
 * `run` and `runBatch` for a staged pipeline. A batch keeps going when one request fails:
 * a bad image fails in `prepare` without touching the others, and when the batched model
 * call itself fails (not for lack of memory), each request is run alone so that only the
 * request that breaks the model fails. An out-of-memory error fails the whole batch: the
 * runner halves its batch and retries the requests on a fresh child.
 */
export function stagedPipeline<Prepared, Inferred>(
  stages: PipelineStages<Prepared, Inferred>,
  maxBatch: number,
): Pick<LoadedPipeline, "run" | "runBatch" | "prepareBatch" | "maxBatch"> {
  const runOne = async (request: RunRequest) => {
    const prepared = await stages.prepare(request);
    const [inferred] = await stages.infer([prepared]);
    return stages.finish(prepared, inferred as Inferred, request);
  };

  async function prepareBatch(requests: readonly RunRequest[]): Promise<PreparedBatch> {
    const prepared = await Promise.allSettled(requests.map((request) => stages.prepare(request)));
    const batch: PreparedBatch = { run: () => inferAndFinish(requests, prepared, batch) };
    return batch;
  }

  async function inferAndFinish(
    requests: readonly RunRequest[],
    prepared: PromiseSettledResult<Prepared>[],
    batch: PreparedBatch,
  ): Promise<PromiseSettledResult<unknown>[]> {
    const started = performance.now();
    const ready = prepared.flatMap((outcome, index) =>
      outcome.status === "fulfilled" ? [{ index, item: outcome.value }] : [],
    );
    const inferred = new Map<number, PromiseSettledResult<Inferred>>();
    if (ready.length > 0) {
      try {
        const outputs = await stages.infer(ready.map(({ item }) => item));
        ready.forEach(({ index }, i) => {
          inferred.set(index, { status: "fulfilled", value: outputs[i] as Inferred });
        });
      } catch (error) {
        if (ready.length === 1 || isOutOfMemory(error)) {
          for (const { index } of ready) inferred.set(index, { status: "rejected", reason: error });
        } else {
          // Find the request that breaks the batch by running each alone.
          for (const { index, item } of ready) {
            try {
              const [output] = await stages.infer([item]);
              inferred.set(index, { status: "fulfilled", value: output as Inferred });
            } catch (alone) {
              inferred.set(index, { status: "rejected", reason: alone });
            }
          }
        }
      }
    }
    batch.deviceMs = performance.now() - started;
    const results = await Promise.allSettled(
      requests.map(async (request, index) => {
        const before = prepared[index]!;
        if (before.status === "rejected") throw before.reason;
        const outcome = inferred.get(index)!;
        if (outcome.status === "rejected") throw outcome.reason;
        return stages.finish(before.value, outcome.value, request);
      }),
    );
    for (const { item } of ready) stages.release?.(item);
    return results;
  }

  return {
    run: runOne,
    prepareBatch,
    runBatch: async (requests) => (await prepareBatch(requests)).run(),
    maxBatch,
  };
}
