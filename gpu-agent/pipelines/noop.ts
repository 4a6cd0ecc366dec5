import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import type { RunRequest } from "../runner/types.ts";
import {
  type LoadedPipeline,
  type PipelineDefinition,
  permanentFailure,
  transientFailure,
} from "./pipeline.ts";

/**
 * The parameters `noop` understands; any other keys are echoed untouched. `fail` lets tests
 * drive the retry and dead-letter paths without a real model.
 */
const NoopParams = z.looseObject({
  delay_ms: z.number().int().min(0).max(60_000).optional(),
  fail: z.enum(["permanent", "transient"]).optional(),
});

/** Echoes `params` back after an optional delay. No inference. */
export const noopPipeline: PipelineDefinition = {
  id: "noop",
  async load(): Promise<LoadedPipeline> {
    return {
      run: runNoop,
      async warm() {},
      async release() {},
    };
  },
};

async function runNoop(request: RunRequest): Promise<unknown> {
  const parsed = NoopParams.safeParse(request.params);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join(".") || "params";
    throw permanentFailure("invalid_params", `${where}: ${issue?.message ?? "invalid"}`);
  }
  const { delay_ms: delayMs, fail } = parsed.data;
  if (delayMs) await sleep(delayMs);
  if (fail === "permanent") {
    throw permanentFailure("noop_failed", "noop was asked to fail permanently");
  }
  if (fail === "transient") {
    throw transientFailure("noop_failed", "noop was asked to fail transiently");
  }
  return request.params;
}
