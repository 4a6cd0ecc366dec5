import * as ort from "onnxruntime-node";
import { afterAll, describe, expect, it } from "vitest";
import { modelCheck } from "../../gpu-agent/doctor/models.ts";
import type { SessionExtras } from "../../gpu-agent/inference/types.ts";
import { ModelRegistryFile, toModelConfigs } from "../../gpu-agent/registry/index.ts";
import { loadModels } from "../../gpu-agent/runner/load-models.ts";
import {
  executionProviders,
  identityModel,
  openSession,
  sessionFactory,
} from "../../gpu-agent/runner/providers.ts";
import { classifierModel, modelFolder } from "../helpers/onnx-models.ts";

// The cases run in order: the last one finds TensorRT unusable on this host (no GPU, no
// TensorRT libraries), and from then on this process asks for it no more.

// onnxruntime's process-wide log would print its complaint about the missing library.
ort.env.logLevel = "fatal";
const models = modelFolder();
afterAll(() => models.cleanup());
const file = models.write(
  "classifier.onnx",
  classifierModel({
    size: 8,
    weights: [
      [1, 0],
      [0, 1],
      [0, 0],
    ],
  }),
);

/** `gantry-agent doctor`'s row for a model the stub loads on CUDA. */
const doctorRow = (tensorrt: boolean) =>
  modelCheck("ocr", {
    providers: ["cuda"],
    threads: 1,
    tensorrt,
    load: async () => ({
      provider: "cuda",
      value: new Map(),
      attempts: [{ provider: "cuda", ok: true }],
    }),
  });

describe("TensorRT (GANTRY_TENSORRT, a model's tensorrt in models.yaml)", () => {
  it("is asked for before CUDA, on the runner's GPU, only for a model that wants it on CUDA", () => {
    expect(executionProviders("cuda", 2, { tensorrt: true })).toEqual([
      { name: "tensorrt", deviceId: 2 },
      { name: "cuda", deviceId: 2 },
    ]);
    expect(executionProviders("cuda", 2, {})).toEqual([{ name: "cuda", deviceId: 2 }]);
    expect(executionProviders("cpu", undefined, { tensorrt: true })).toEqual(["cpu"]);
  });

  it("models.yaml's tensorrt reaches each model's sessions, over the runner's own setting", async () => {
    const registry = ModelRegistryFile.parse({
      models: [
        { id: "plain", task: "classification", tensorrt: false },
        { id: "fast", task: "classification" },
      ],
    });
    const configs = toModelConfigs(
      registry.models.map((entry) => ({ ...entry, files: { model: file } })),
    );
    expect(configs.plain).toMatchObject({ tensorrt: false });
    const seen: (SessionExtras | undefined)[] = [];
    const selection = await loadModels({
      models: ["plain", "fast"],
      configs,
      providers: ["cuda"],
      threads: 1,
      tensorrt: true,
      probe: async () => {},
      // Sessions really open, on the CPU: what is checked is what each model asked for.
      createSessionFactory: (_provider, threads) => async (path, extras) => {
        seen.push(extras);
        return sessionFactory("cpu", threads)(path);
      },
    });
    expect(seen).toEqual([{ tensorrt: false }, { tensorrt: true }]);
    await Promise.all([...selection.value.values()].map((pipeline) => pipeline.release()));
  });

  it("the doctor's model row says TensorRT when it was asked for and nothing failed", async () => {
    expect(await doctorRow(true)).toMatchObject({
      status: "pass",
      detail: expect.stringMatching(/on TensorRT and cuda/),
    });
    expect(await doctorRow(false)).toMatchObject({
      status: "pass",
      detail: expect.stringMatching(/on cuda in/),
    });
  });

  it("an error that is not TensorRT's is not taken for one", async () => {
    let calls = 0;
    const opening = openSession(
      async () => {
        calls++;
        throw new Error("CUDA failure 2: out of memory");
      },
      "cuda",
      1,
      0,
      { tensorrt: true },
    );
    await expect(opening).rejects.toThrow(/out of memory/);
    expect(calls).toBe(1);
  });

  it("without TensorRT's libraries the session opens on CUDA alone, says why once, and asks no more", async () => {
    const asked: unknown[] = [];
    const reasons: string[] = [];
    const opened = await openSession(
      async (options) => {
        asked.push(options.executionProviders);
        // The first try is onnxruntime's own, which cannot load TensorRT on this host.
        if (asked.length === 1) return ort.InferenceSession.create(identityModel(), options);
        return "the CUDA session";
      },
      "cuda",
      1,
      0,
      { tensorrt: true },
      (reason) => reasons.push(reason),
    );
    expect(opened).toBe("the CUDA session");
    expect(asked).toEqual([
      [
        { name: "tensorrt", deviceId: 0 },
        { name: "cuda", deviceId: 0 },
      ],
      [{ name: "cuda", deviceId: 0 }],
    ]);
    expect(reasons).toEqual([expect.stringMatching(/TensorRT/)]);
    expect(executionProviders("cuda", 0, { tensorrt: true })).toEqual([
      { name: "cuda", deviceId: 0 },
    ]);
  });

  it("then the doctor's model row warns that it runs on CUDA alone, and why", async () => {
    expect(await doctorRow(true)).toMatchObject({
      status: "warn",
      detail: expect.stringMatching(/TensorRT unavailable, on CUDA alone: .*TensorRT/),
      hint: expect.stringMatching(/libnvinfer/),
    });
  });
});
