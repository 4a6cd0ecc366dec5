/**
 * The runner's child process: loads models into onnxruntime and runs jobs the parent sends.
 * It lives in its own process so that a CUDA crash, an out-of-memory kill or a native abort
 * takes down this process only; the parent reports the job as transiently failed and forks
 * a fresh child.
 */
import type { JobError } from "../../shared/protocol/index.ts";
import { findPipeline, type LoadedPipeline, PipelineFailure } from "../pipelines/index.ts";
import {
  type ChildMessage,
  type LoadMessage,
  ParentMessage,
  type RunMessage,
} from "./child-protocol.ts";
import { errorMessage, probeProvider, selectProvider, sessionFactory } from "./providers.ts";
import type { RunResult } from "./types.ts";

const loaded = new Map<string, LoadedPipeline>();

function send(message: ChildMessage): void {
  process.send?.(message);
}

function log(level: "info" | "warn" | "error", msg: string, data?: Record<string, unknown>): void {
  send({ v: 1, type: "log", level, msg, ...(data ? { data } : {}) });
}

async function load(message: LoadMessage): Promise<void> {
  const started = performance.now();
  const unknown = message.models.filter((model) => !findPipeline(model));
  if (unknown.length > 0) {
    fail({
      type: "permanent",
      code: "unknown_model",
      message: `unknown model(s): ${unknown.join(", ")}`,
    });
    return;
  }
  try {
    const selection = await selectProvider(message.providers, async (provider) => {
      // The probe proves the provider works even when no configured model uses onnxruntime.
      await probeProvider(provider);
      return loadPipelines(message.models, provider, message.threads);
    });
    for (const attempt of selection.attempts) {
      if (!attempt.ok) {
        log("warn", `execution provider ${attempt.provider} unavailable: ${attempt.reason}`, {
          provider: attempt.provider,
        });
      }
    }
    for (const [model, pipeline] of selection.value) loaded.set(model, pipeline);
    send({
      v: 1,
      type: "ready",
      provider: selection.provider,
      attempts: selection.attempts,
      models: [...loaded.keys()],
      loadMs: performance.now() - started,
    });
  } catch (error) {
    fail({ type: "transient", code: "model_load_failed", message: errorMessage(error) });
  }
}

/** Loads and warms every model on one provider, releasing them all if any fails. */
async function loadPipelines(
  models: readonly string[],
  provider: LoadMessage["providers"][number],
  threads: number,
): Promise<Map<string, LoadedPipeline>> {
  const createSession = sessionFactory(provider, threads);
  const pipelines = new Map<string, LoadedPipeline>();
  try {
    for (const model of models) {
      const pipeline = await findPipeline(model)!.load({ provider, threads, createSession });
      pipelines.set(model, pipeline);
      await pipeline.warm();
    }
    return pipelines;
  } catch (error) {
    await Promise.allSettled([...pipelines.values()].map((pipeline) => pipeline.release()));
    throw error;
  }
}

/** Reports a failed load and exits, so the parent sees one clear reason. */
function fail(error: JobError): void {
  const message: ChildMessage = { v: 1, type: "load_failed", error };
  process.send?.(message, undefined, undefined, () => process.exit(1));
}

async function run({ id, request }: RunMessage): Promise<void> {
  const started = performance.now();
  const result = await runPipeline(request);
  send({ v: 1, type: "result", id, result, durationMs: performance.now() - started });
}

async function runPipeline(request: RunMessage["request"]): Promise<RunResult> {
  const pipeline = loaded.get(request.model);
  if (!pipeline) {
    const served = [...loaded.keys()].join(", ") || "none";
    return {
      ok: false,
      error: {
        type: "permanent",
        code: "unknown_model",
        message: `model ${request.model} is not served here (models: ${served})`,
      },
    };
  }
  try {
    return { ok: true, output: await pipeline.run(request) };
  } catch (error) {
    if (error instanceof PipelineFailure) return { ok: false, error: error.jobError };
    // Unexpected: a bug or a device fault, either of which a retry may not meet again.
    log("error", "inference failed", { job_id: request.jobId, error: errorMessage(error) });
    return {
      ok: false,
      error: {
        type: "transient",
        code: "inference_failed",
        message: errorMessage(error).slice(0, 2000),
      },
    };
  }
}

if (!process.send) {
  console.error("gpu-agent/runner/child.ts runs only as a forked child of the runner");
  process.exit(2);
}

process.on("message", (raw: unknown) => {
  const parsed = ParentMessage.safeParse(raw);
  if (!parsed.success) {
    log("error", "ignored a malformed message from the runner", {
      issues: parsed.error.issues.map((issue) => issue.message),
    });
    return;
  }
  const message = parsed.data;
  if (message.type === "load") void load(message);
  else void run(message);
});

// The parent is gone (crashed or killed): nobody will read results, so stop now.
process.on("disconnect", () => process.exit(0));
// Ctrl-C in a terminal signals the whole process group. The supervisor decides when this
// runner stops (after draining its job), so the child ignores SIGINT and waits to be told.
process.on("SIGINT", () => {});
