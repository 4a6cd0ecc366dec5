import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunRequest } from "../../gpu-agent/inference/types.ts";
import type { LoadedPipeline } from "../../gpu-agent/pipelines/pipeline.ts";
import { tensorPipeline } from "../../gpu-agent/pipelines/tensor/index.ts";
import { affineModel, loadOnCpu, modelFolder } from "../helpers/onnx-models.ts";
import { jobErrorOf } from "../helpers/pipeline-failure.ts";

const models = modelFolder();
afterAll(() => models.cleanup());

const request = (params: Record<string, unknown>): RunRequest => ({
  jobId: "job_tensor",
  model: "affine",
  files: {},
  params,
});

const inputs = (x: number[][], k: (number | string)[]) => ({
  inputs: {
    x: { dims: [x.length, 4], type: "float32", data: x.flat() },
    k: { dims: [k.length, 1], type: "int64", data: k },
  },
});

describe("tensor (raw named tensors in and out)", () => {
  let pipeline: LoadedPipeline;

  beforeAll(async () => {
    const file = models.write("affine.onnx", affineModel());
    pipeline = await loadOnCpu(tensorPipeline, "affine", { pipeline: "tensor", file });
  });
  afterAll(() => pipeline?.release());

  it("runs named inputs of several types and returns every output", async () => {
    const output = await pipeline.run(request(inputs([[1, 2, 3, 4]], ["9007199254740993"])));
    expect(output).toEqual({
      outputs: {
        y: { dims: [1, 4], type: "float32", data: [3, 5, 7, 9] },
        // Past 2^53 an int64 cannot be a JSON number without losing digits: a string.
        next: { dims: [1, 1], type: "int64", data: ["9007199254740994"] },
      },
    });
  });

  it("returns only the outputs asked for", async () => {
    const output = await pipeline.run(
      request({ ...inputs([[0, 0, 0, 0]], [1]), outputs: ["next"] }),
    );
    expect(output).toEqual({ outputs: { next: { dims: [1, 1], type: "int64", data: [2] } } });
  });

  it.each([
    [
      "a missing input",
      { inputs: { x: { dims: [1, 4], type: "float32", data: [1, 2, 3, 4] } } },
      /input k is missing/,
    ],
    [
      "an unknown input",
      {
        inputs: {
          ...inputs([[1, 2, 3, 4]], [1]).inputs,
          z: { dims: [1], type: "float32", data: [1] },
        },
      },
      /unknown input\(s\) z/,
    ],
    [
      "a wrong type",
      {
        inputs: {
          ...inputs([[1, 2, 3, 4]], [1]).inputs,
          k: { dims: [1, 1], type: "int32", data: [1] },
        },
      },
      /expected int64, got int32/,
    ],
    [
      "a wrong fixed dimension",
      {
        inputs: {
          ...inputs([[1, 2, 3, 4]], [1]).inputs,
          x: { dims: [1, 3], type: "float32", data: [1, 2, 3] },
        },
      },
      /expected dims \[\?, 4\], got \[1, 3\]/,
    ],
    [
      "data that does not fill the dims",
      {
        inputs: {
          ...inputs([[1, 2, 3, 4]], [1]).inputs,
          x: { dims: [2, 4], type: "float32", data: [1, 2, 3, 4] },
        },
      },
      /hold 8 elements but data has 4/,
    ],
    [
      "a float where an integer goes",
      inputs([[1, 2, 3, 4]], [1.5 as unknown as number]),
      /1.5 is not a 64-bit integer/,
    ],
  ])("refuses %s permanently, saying what is wrong", async (_, params, message) => {
    const error = await jobErrorOf(pipeline.run(request(params)));
    expect(error.type).toBe("permanent");
    expect(error.message).toMatch(message);
  });

  it("refuses params without inputs", async () => {
    expect(await jobErrorOf(pipeline.run(request({})))).toMatchObject({
      type: "permanent",
      code: "invalid_params",
    });
  });

  it("batches jobs along the first axis, each keeping its own rows", async () => {
    const one = request(inputs([[1, 1, 1, 1]], [10]));
    const two = request(
      inputs(
        [
          [2, 2, 2, 2],
          [3, 3, 3, 3],
        ],
        [20, 30],
      ),
    );
    const bad = request(inputs([[1, 1, 1, 1]], ["x"]));
    expect(pipeline.maxBatch).toBe(8);
    const settled = await pipeline.runBatch!([one, bad, two]);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect((settled[0] as PromiseFulfilledResult<unknown>).value).toEqual(await pipeline.run(one));
    expect((settled[2] as PromiseFulfilledResult<unknown>).value).toEqual({
      outputs: {
        y: { dims: [2, 4], type: "float32", data: [5, 5, 5, 5, 7, 7, 7, 7] },
        next: { dims: [2, 1], type: "int64", data: [21, 31] },
      },
    });
  });
});
