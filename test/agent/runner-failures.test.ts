import type * as ort from "onnxruntime-node";
import sharp from "sharp";
import { afterAll, describe, expect, it } from "vitest";
import { OUT_OF_MEMORY_SAMPLE } from "../../gpu-agent/inference/oom.ts";
import type {
  ExecutionProvider,
  RunRequest,
  SessionFactory,
} from "../../gpu-agent/inference/types.ts";
import { noopPipeline } from "../../gpu-agent/pipelines/noop.ts";
import { PipelineFailure } from "../../gpu-agent/pipelines/pipeline.ts";
import { createChildRunner } from "../../gpu-agent/runner/child-runner.ts";
import { classifyError, executeBatch } from "../../gpu-agent/runner/execute.ts";
import { loadModels } from "../../gpu-agent/runner/load-models.ts";
import { createRunnerPool } from "../../gpu-agent/runner/pool.ts";
import { NoUsableProviderError, sessionFactory } from "../../gpu-agent/runner/providers.ts";
import { CPU_RUN_USAGE, harnessPerTest, silentLogger } from "../helpers/agent-harness.ts";
import { classifierModel, imageRequest, modelFolder } from "../helpers/onnx-models.ts";

const models = modelFolder();
afterAll(() => models.cleanup());
const classifierFile = models.write(
  "classifier.onnx",
  classifierModel({
    size: 16,
    weights: [
      [1, 0],
      [0, 1],
      [0, 0],
    ],
  }),
);
const configs = { colours: { pipeline: "classification", file: classifierFile, max_batch: 4 } };

/** A session whose `run` throws `failure(feeds)` when it returns a message, else runs. */
function failingRuns(
  failure: (feeds: ort.InferenceSession.FeedsType) => string | null,
): (provider: ExecutionProvider, threads: number) => SessionFactory {
  return (provider, threads) => async (path) => {
    const session = await sessionFactory("cpu", threads)(path);
    const run = session.run.bind(session);
    Object.defineProperty(session, "run", {
      value: (feeds: ort.InferenceSession.FeedsType, ...rest: []) => {
        const message = failure(feeds);
        return message ? Promise.reject(new Error(`${provider}: ${message}`)) : run(feeds, ...rest);
      },
    });
    return session;
  };
}

const cpuOnly = (reason: string) => (provider: ExecutionProvider, threads: number) => {
  if (provider === "cuda") {
    return async () => {
      throw new Error(reason);
    };
  }
  return sessionFactory(provider, threads);
};

const probeOk = async () => {};

describe("execution provider selection and fallback", () => {
  it("falls back to cpu when the CUDA provider libraries are missing", async () => {
    const missing =
      "Failed to load shared library libonnxruntime_providers_cuda.so: libcublasLt.so.12: cannot open shared object file";
    const selection = await loadModels({
      models: ["colours"],
      configs,
      providers: ["cuda", "cpu"],
      threads: 1,
      probe: probeOk,
      createSessionFactory: cpuOnly(missing),
    });
    expect(selection.provider).toBe("cpu");
    expect(selection.attempts).toEqual([
      { provider: "cuda", ok: false, reason: missing },
      { provider: "cpu", ok: true },
    ]);
    await Promise.all([...selection.value.values()].map((p) => p.release()));
  });

  it("falls back when the CUDA provider fails to initialise (no device)", async () => {
    const selection = await loadModels({
      models: ["noop"],
      providers: ["cuda", "cpu"],
      threads: 1,
      probe: async (provider) => {
        if (provider === "cuda")
          throw new Error("CUDA failure 100: no CUDA-capable device is detected");
      },
    });
    expect(selection.provider).toBe("cpu");
    expect(selection.attempts[0]).toMatchObject({
      ok: false,
      reason: expect.stringContaining("no CUDA-capable device"),
    });
  });

  it("falls back when warming up on cuda runs out of memory", async () => {
    const selection = await loadModels({
      models: ["colours"],
      configs,
      providers: ["cuda", "cpu"],
      threads: 1,
      probe: probeOk,
      createSessionFactory: (provider, threads) =>
        failingRuns(() => (provider === "cuda" ? OUT_OF_MEMORY_SAMPLE : null))(provider, threads),
    });
    expect(selection.provider).toBe("cpu");
    expect(selection.attempts[0]!.reason).toContain("Failed to allocate memory");
    await Promise.all([...selection.value.values()].map((p) => p.release()));
  });

  it("names every provider's failure when none works", async () => {
    const loading = loadModels({
      models: ["colours"],
      configs,
      providers: ["cuda", "cpu"],
      threads: 1,
      probe: probeOk,
      createSessionFactory: (provider) => async () => {
        throw new Error(`${provider} will not load`);
      },
    });
    await expect(loading).rejects.toBeInstanceOf(NoUsableProviderError);
    await expect(loading).rejects.toThrow("cuda (cuda will not load); cpu (cpu will not load)");
  });
});

describe("out of memory during a run", () => {
  it.each([
    "CUDA out of memory. Tried to allocate 2.00 GiB",
    "Failed to allocate memory for requested buffer of size 1073741824",
    OUT_OF_MEMORY_SAMPLE,
    "CUDA error cudaErrorMemoryAllocation:out of memory",
    "std::bad_alloc",
  ])("classifies %j as out_of_memory", (message) => {
    expect(classifyError(new Error(message))).toEqual({
      type: "transient",
      code: "out_of_memory",
      message,
    });
  });

  it("keeps other failures apart", () => {
    expect(classifyError(new Error("Got invalid dimensions for input"))).toMatchObject({
      code: "inference_failed",
    });
    const permanent = new PipelineFailure({
      type: "permanent",
      code: "invalid_image",
      message: "x",
    });
    expect(classifyError(permanent)).toEqual(permanent.jobError);
  });

  it("fails a whole batch that runs out of memory; other batch failures are run alone", async () => {
    let oom = false;
    const selection = await loadModels({
      models: ["colours"],
      configs,
      providers: ["cpu"],
      threads: 1,
      probe: probeOk,
      // Out of memory when switched on; otherwise a batch of more than one breaks the model.
      createSessionFactory: failingRuns((feeds) => {
        if (oom) return OUT_OF_MEMORY_SAMPLE;
        const rows = Object.values(feeds)[0]?.dims[0] ?? 1;
        return rows > 1 ? "Non-zero status code returned while running Gemm node" : null;
      }),
    });
    const pipeline = selection.value.get("colours")!;
    try {
      const png = await sharp({
        create: { width: 20, height: 20, channels: 3, background: "#f00" },
      })
        .png()
        .toBuffer();
      const batch: RunRequest[] = [1, 2, 3].map((n) => ({
        ...imageRequest("colours", png),
        jobId: `j${n}`,
      }));

      const isolated = await executeBatch(pipeline, batch);
      expect(isolated.map((r) => r.ok)).toEqual([true, true, true]);

      oom = true;
      const results = await executeBatch(pipeline, batch);
      expect(results).toEqual(
        batch.map(() => ({
          ok: false,
          error: expect.objectContaining({ type: "transient", code: "out_of_memory" }),
        })),
      );
    } finally {
      await pipeline.release();
    }
  });
});

describe("the child runner after running out of memory", () => {
  it("halves the batch, replaces the child, and the jobs succeed in smaller batches", async () => {
    const runner = createChildRunner({
      models: ["noop-batch"],
      threads: 1,
      providers: ["cpu"],
      logger: silentLogger,
      modelConfigs: { "noop-batch": { pipeline: "noop", max_batch: 4 } },
    });
    try {
      await runner.start();
      const firstPid = runner.pid;
      expect(runner.batching!("noop-batch").maxBatch).toBe(4);
      const pool = createRunnerPool([runner]);
      const batches: number[] = [];
      const results = await Promise.all(
        [1, 2, 3, 4].map((n) =>
          pool.run(
            {
              jobId: `job_${n}`,
              model: "noop-batch",
              files: {},
              params: { n, oom_if_batch_over: 1 },
            },
            { onStart: ({ batch }) => batches.push(batch) },
          ),
        ),
      );
      expect(results.map((r) => r.ok && r.output)).toEqual(
        [1, 2, 3, 4].map((n) => ({ n, oom_if_batch_over: 1 })),
      );
      // A batch of more than one ran out of memory, and the halving went on until every job
      // ran alone (how the first batch forms depends on when the model is warm: the first
      // job may go out on its own while the others queue behind it).
      expect(Math.max(...batches)).toBeGreaterThan(1);
      expect(batches.at(-1)).toBe(1);
      expect(batches.filter((size) => size === 1).length).toBeGreaterThanOrEqual(3);
      expect(runner.batching!("noop-batch").maxBatch).toBe(1);
      expect(runner.restarts).toBeGreaterThanOrEqual(1);
      const restartsBefore = runner.restarts;
      expect(runner.pid).not.toBe(firstPid);

      // Out of memory alone: the job fails transiently (the queue retries it) on a fresh child.
      const alone = await runner.run({
        jobId: "job_big",
        model: "noop-batch",
        files: {},
        params: { oom_if_batch_over: 0 },
      });
      expect(alone).toMatchObject({
        ok: false,
        error: { type: "transient", code: "out_of_memory" },
      });
      expect(
        await runner.run({ jobId: "job_after", model: "noop-batch", files: {}, params: {} }),
      ).toEqual({
        ok: true,
        output: {},
        usage: CPU_RUN_USAGE,
      });
      expect(runner.restarts).toBe(restartsBefore + 1);
    } finally {
      await runner.stop();
    }
  });
});

describe("poison jobs", () => {
  const start = harnessPerTest();

  it("dead-letters a job that crashes the runner three times as poison_job", async () => {
    const runner = createChildRunner({
      models: ["noop"],
      threads: 1,
      providers: ["cpu"],
      logger: silentLogger,
      restartDelayMs: 10,
    });
    const h = await start({ runners: [runner], config: { maxAttempts: 5 } });
    const id = h.gateway.addJob({ input: { crash: true } }).job.id;

    await h.queue.publish(h.gateway.message(id));

    expect(await h.settled(id, 3)).toMatchObject({
      outcome: "dead-lettered",
      error: { type: "permanent", code: "poison_job" },
    });
    expect(
      h.gateway.events(id).map((e) => e.type === "failed" && [e.error.code, e.will_retry]),
    ).toEqual([
      ["runner_crashed", true],
      ["runner_crashed", true],
      ["poison_job", false],
    ]);
    expect(await h.sql.deadLetters()).toEqual([
      expect.objectContaining({
        attempts: 3,
        error: expect.objectContaining({ code: "poison_job" }),
      }),
    ]);
    expect(runner.restarts).toBe(3);
  });

  it("never exits the process outside a runner child", async () => {
    const pipeline = await noopPipeline.load({
      provider: "cpu",
      threads: 1,
      createSession: sessionFactory("cpu", 1),
    });
    const error = await pipeline
      .run({ jobId: "j", model: "noop", files: {}, params: { crash: true } })
      .catch((e) => e);
    expect(error).toBeInstanceOf(PipelineFailure);
  });
});
