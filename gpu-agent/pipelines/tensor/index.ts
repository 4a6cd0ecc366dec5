import type * as ort from "onnxruntime-node";
import { type TensorOutput, tensorTask } from "../../../shared/tasks/tensor.ts";
import { type NamedTensors, runStacked } from "../../batching/stack.ts";
import { stagedPipeline } from "../../batching/staged.ts";
import type { RunRequest } from "../../inference/types.ts";
import { ModelConfigError, requireModelFile } from "../model-config.ts";
import {
  type LoadedPipeline,
  type PipelineDefinition,
  permanentFailure,
  taskParams,
} from "../pipeline.ts";
import { maxBatchFor } from "../vision/input-shape.ts";
import { fromJson, type JsonTensor, toJson } from "./codec.ts";

interface Prepared {
  feeds: NamedTensors;
  outputs: readonly string[];
}

/**
 * Raw tensors in and out for any ONNX model: the job input is `{ inputs: { name: { dims,
 * type, data } } }`, checked against the model's declared inputs (names, element types,
 * rank, fixed dimensions); the output is `{ outputs: { name: { dims, type, data } } }`.
 * Jobs batch when every input's first axis is dynamic; each job keeps its own rows.
 */
export const tensorPipeline: PipelineDefinition = {
  id: tensorTask.id,
  async load({ createSession, config, modelId = "tensor" }): Promise<LoadedPipeline> {
    const session = await createSession(requireModelFile(modelId, config));
    const declared = session.inputMetadata.flatMap((input) => (input.isTensor ? [input] : []));
    if (declared.length !== session.inputMetadata.length) {
      throw new ModelConfigError(`model ${modelId}: only tensor inputs can be sent as JSON`);
    }
    const dynamicBatch = declared.every((input) => {
      const batch = input.shape[0];
      return input.shape.length > 0 && !(typeof batch === "number" && batch > 0);
    });

    const prepare = async (request: RunRequest): Promise<Prepared> => {
      const { inputs, outputs = session.outputNames } = taskParams(tensorTask.params, request);
      const unknownOutputs = outputs.filter((name) => !session.outputNames.includes(name));
      if (unknownOutputs.length > 0) {
        throw permanentFailure(
          "invalid_params",
          `unknown output(s) ${unknownOutputs.join(", ")}; the model has ${session.outputNames.join(", ")}`,
        );
      }
      const extra = Object.keys(inputs).filter((name) => !session.inputNames.includes(name));
      if (extra.length > 0) {
        throw permanentFailure(
          "invalid_tensor",
          `unknown input(s) ${extra.join(", ")}; the model takes ${session.inputNames.join(", ")}`,
        );
      }
      const feeds: NamedTensors = {};
      for (const input of declared) {
        const given = inputs[input.name];
        if (!given) throw permanentFailure("invalid_tensor", `input ${input.name} is missing`);
        checkAgainst(input, given);
        feeds[input.name] = fromJson(input.name, given);
      }
      return { feeds, outputs };
    };

    const staged = stagedPipeline<Prepared, NamedTensors>(
      {
        prepare,
        infer: (items) =>
          runStacked(
            session,
            items.map((item) => item.feeds),
          ),
        finish: (item, outputs): TensorOutput => ({
          outputs: Object.fromEntries(item.outputs.map((name) => [name, toJson(outputs[name]!)])),
        }),
      },
      maxBatchFor(dynamicBatch, config),
    );

    return {
      ...staged,
      // Inputs of unknown meaning have no safe synthetic value; the first job warms the model.
      async warm() {},
      release: () => session.release(),
    };
  },
};

function checkAgainst(input: ort.InferenceSession.TensorValueMetadata, given: JsonTensor): void {
  const fail = (detail: string) =>
    permanentFailure("invalid_tensor", `input ${input.name}: ${detail}`);
  if (given.type !== input.type) throw fail(`expected ${input.type}, got ${given.type}`);
  // An empty declared shape means the model does not say; anything goes.
  if (input.shape.length === 0) return;
  const expected = input.shape.map((dim) => (typeof dim === "number" && dim >= 0 ? dim : "?"));
  const mismatch =
    given.dims.length !== input.shape.length ||
    expected.some((dim, axis) => dim !== "?" && dim !== given.dims[axis]);
  if (mismatch) {
    throw fail(`expected dims [${expected.join(", ")}], got [${given.dims.join(", ")}]`);
  }
}
