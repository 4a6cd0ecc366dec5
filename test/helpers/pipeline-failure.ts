import { expect } from "vitest";
import { PipelineFailure } from "../../gpu-agent/pipelines/pipeline.ts";
import type { JobError } from "../../shared/protocol/index.ts";

/** The job error a pipeline run failed with; fails the test if it did not fail so. */
export async function jobErrorOf(promise: Promise<unknown>): Promise<JobError> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PipelineFailure);
  return (error as PipelineFailure).jobError;
}
