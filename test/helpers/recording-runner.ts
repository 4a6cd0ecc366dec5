import * as ort from "onnxruntime-node";
import type {
  ExecutionProvider,
  ModelSession,
  RunRequest,
  RunResult,
  SessionFactory,
} from "../../gpu-agent/inference/types.ts";
import { PipelineFailure } from "../../gpu-agent/pipelines/index.ts";
import type { LoadedPipeline } from "../../gpu-agent/pipelines/pipeline.ts";
import { declaredMb } from "../../gpu-agent/runner/child-models.ts";
import { loadModel } from "../../gpu-agent/runner/load-models.ts";
import type { ChildRunnerOptions, Runner } from "../../gpu-agent/runner/types.ts";

/** A session some runner opened: on which provider and CUDA device, for which model file. */
export interface OpenedSession {
  runner: number;
  provider: ExecutionProvider;
  deviceId: number | undefined;
  file: string;
}

/** What a CUDA device that fell off the bus answers to every run. */
export const CUDA_FAULT = "CUDA failure 700: an illegal memory access was encountered";

export interface RecordingRunners {
  /** Every session opened, in order. */
  opened: OpenedSession[];
  /** Every model load and unload, in order: `runner 2 load a`. */
  events: string[];
  /** The runners made so far, by index. */
  runners: Runner[];
  /** For `startAgent`'s `createRunner`. */
  create(options: ChildRunnerOptions): Runner;
}

/**
 * Runners that run the real pipelines in this process, through a session factory that
 * records what each opened (provider, CUDA device id, file): sessions run on the CPU, as
 * there is no GPU here. Sessions opened on `failingDevice` fail every run with a CUDA
 * fault, which kills the runner the way it kills a runner child: the run comes back
 * `runner_crashed` and the runner restarts with nothing loaded.
 */
export function recordingRunners(options: { failingDevice?: number } = {}): RecordingRunners {
  const opened: OpenedSession[] = [];
  const events: string[] = [];
  const runners: Runner[] = [];
  const sessionsFor =
    (runner: number) =>
    (provider: ExecutionProvider, deviceId: number | undefined): SessionFactory =>
    async (file) => {
      opened.push({ runner, provider, deviceId, file });
      const session = await ort.InferenceSession.create(file, { executionProviders: ["cpu"] });
      if (deviceId === undefined || deviceId !== options.failingDevice) return session;
      const failing: ModelSession = {
        inputNames: session.inputNames,
        outputNames: session.outputNames,
        inputMetadata: session.inputMetadata,
        outputMetadata: session.outputMetadata,
        run: async () => {
          throw new Error(CUDA_FAULT);
        },
        release: () => session.release(),
      };
      return failing;
    };

  function create(runnerOptions: ChildRunnerOptions): Runner {
    const index = runners.length;
    const provider: ExecutionProvider = runnerOptions.gpu ? "cuda" : "cpu";
    const deviceId = runnerOptions.gpu?.cudaDeviceId;
    const createSession = (file: string) => sessionsFor(index)(provider, deviceId)(file);
    const configs = runnerOptions.modelConfigs;
    const loaded = new Map<string, { pipeline: LoadedPipeline; mb: number }>();
    let started = false;
    let restarts = 0;
    const sizeOf = (model: string) => declaredMb(configs?.[model]) ?? 0;
    const load = async (model: string) => {
      const pipeline = await loadModel(model, { provider, threads: 1, createSession, configs });
      loaded.set(model, { pipeline, mb: sizeOf(model) });
      events.push(`runner ${index} load ${model}`);
      return { memoryMb: sizeOf(model) };
    };
    const runner: Runner = {
      get restarts() {
        return restarts;
      },
      get provider() {
        return started ? provider : null;
      },
      get pid() {
        return started ? 80_000 + index : null;
      },
      ...(runnerOptions.gpu ? { gpu: runnerOptions.gpu.index } : {}),
      async start() {
        let used = 0;
        for (const model of runnerOptions.preload ?? runnerOptions.models) {
          const budget = runnerOptions.memoryBudgetMb ?? Number.POSITIVE_INFINITY;
          if (loaded.size > 0 && used + sizeOf(model) > budget) break;
          await load(model);
          used += sizeOf(model);
        }
        started = true;
      },
      async run(request: RunRequest): Promise<RunResult> {
        const entry = loaded.get(request.model);
        if (!entry) {
          const message = `model ${request.model} is not loaded on runner ${index}`;
          return { ok: false, error: { type: "permanent", code: "unknown_model", message } };
        }
        try {
          return { ok: true, output: await entry.pipeline.run(request) };
        } catch (error) {
          if (error instanceof PipelineFailure) return { ok: false, error: error.jobError };
          const message = error instanceof Error ? error.message : String(error);
          if (!message.includes("CUDA failure")) {
            return { ok: false, error: { type: "transient", code: "inference_failed", message } };
          }
          // The child died with its device: a new one starts with nothing loaded.
          restarts++;
          loaded.clear();
          events.push(`runner ${index} crashed`);
          return { ok: false, error: { type: "transient", code: "runner_crashed", message } };
        }
      },
      loadModel: load,
      async unloadModel(model) {
        await loaded.get(model)?.pipeline.release();
        loaded.delete(model);
        events.push(`runner ${index} unload ${model}`);
      },
      loadedModels: () => new Map([...loaded].map(([model, { mb }]) => [model, mb])),
      async stop() {
        started = false;
      },
    };
    runners.push(runner);
    return runner;
  }

  return { opened, events, runners, create };
}
