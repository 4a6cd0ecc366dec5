import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import onnxProto from "onnx-proto";
import type { RunRequest } from "../../gpu-agent/inference/types.ts";
import type { ModelConfig } from "../../gpu-agent/pipelines/model-config.ts";
import type { LoadedPipeline, PipelineDefinition } from "../../gpu-agent/pipelines/pipeline.ts";
import { DeviceThread } from "../../gpu-agent/runner/device-thread.ts";
import { mulberry32 } from "./seeded-random.ts";

/**
 * Small ONNX models built in the test, with the input and output signatures of the model
 * families the pipelines serve (RMBG/U²-Net masks, YOLOv8 heads, ImageNet classifiers). They
 * compute something simple and predictable so tests can check the pipelines around them.
 */
const { onnx } = onnxProto;
type Node = onnxProto.onnx.INodeProto;
type Tensor = onnxProto.onnx.ITensorProto;
type ValueInfo = onnxProto.onnx.IValueInfoProto;

/** A dimension: a number is fixed, a string is symbolic (dynamic), e.g. the batch axis. */
export type Dim = number | string;

const FLOAT = onnx.TensorProto.DataType.FLOAT;
const INT64 = onnx.TensorProto.DataType.INT64;

function valueInfo(name: string, elemType: number, dims: readonly Dim[]): ValueInfo {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: {
          dim: dims.map((dim) => (typeof dim === "number" ? { dimValue: dim } : { dimParam: dim })),
        },
      },
    },
  };
}

export function node(
  opType: string,
  input: string[],
  output: string[],
  attributes: Record<string, number | number[]> = {},
): Node {
  const attribute = Object.entries(attributes).map(([name, value]) =>
    Array.isArray(value)
      ? { name, type: onnx.AttributeProto.AttributeType.INTS, ints: value }
      : Number.isInteger(value)
        ? { name, type: onnx.AttributeProto.AttributeType.INT, i: value }
        : { name, type: onnx.AttributeProto.AttributeType.FLOAT, f: value },
  );
  return { opType, input, output, attribute };
}

export function floats(name: string, dims: number[], data: ArrayLike<number>): Tensor {
  // Raw little-endian bytes: protobufjs would encode millions of numbers one by one.
  const values = Float32Array.from(data);
  return { name, dims, dataType: FLOAT, rawData: new Uint8Array(values.buffer) };
}

export function int64s(name: string, dims: number[], data: number[]): Tensor {
  return { name, dims, dataType: INT64, int64Data: data };
}

export interface GraphSpec {
  inputs: { name: string; type?: "float32" | "int64"; dims: Dim[] }[];
  outputs: { name: string; type?: "float32" | "int64"; dims: Dim[] }[];
  nodes: Node[];
  initializers?: Tensor[];
}

/** Encodes a graph as an ONNX model (IR 7, opset 13: what onnxruntime 1.x runs everywhere). */
export function buildModel(spec: GraphSpec): Uint8Array {
  const elem = (type: "float32" | "int64" | undefined) => (type === "int64" ? INT64 : FLOAT);
  const model = onnx.ModelProto.create({
    irVersion: 7,
    producerName: "gantry-tests",
    opsetImport: [{ domain: "", version: 13 }],
    graph: {
      name: "test",
      node: spec.nodes,
      initializer: spec.initializers ?? [],
      input: spec.inputs.map((input) => valueInfo(input.name, elem(input.type), input.dims)),
      output: spec.outputs.map((output) => valueInfo(output.name, elem(output.type), output.dims)),
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

/**
 * A background-removal model: the mask is `4 × mean(channels)` of the normalised input, so
 * white is foreground and black background. RMBG-2.0 style outputs that as logits; U²-Net
 * style passes it through a sigmoid and has seven outputs, d0 (the fused mask) first.
 */
/** `size` may be symbolic (a string): then height and width are dynamic, as BiRefNet's are. */
export function maskModel(options: { size: Dim; batch?: Dim; style: "rmbg" | "u2net" }) {
  const { size, batch = "batch", style } = options;
  const dims = [batch, 1, size, size];
  const nodes = [
    node("ReduceMean", ["input"], ["mean"], { axes: [1], keepdims: 1 }),
    node("Mul", ["mean", "gain"], ["logits"]),
  ];
  const outputs =
    style === "rmbg"
      ? [{ name: "logits", dims }]
      : Array.from({ length: 7 }, (_, i) => ({ name: `d${i}`, dims }));
  if (style === "u2net") {
    nodes.push(node("Sigmoid", ["logits"], ["d0"]));
    for (let i = 1; i < 7; i++) nodes.push(node("Identity", ["d0"], [`d${i}`]));
  }
  return buildModel({
    inputs: [{ name: "input", dims: [batch, 3, size, size] }],
    outputs,
    nodes,
    initializers: [floats("gain", [], [4])],
  });
}

/**
 * A YOLOv8-shaped detector (`[N, 3, S, S]` in, `[N, 4 + classes, anchors]` out) whose head
 * is the constant `head` (row-major `[4 + classes, anchors]`, letterboxed pixels) whatever
 * the image: the test decides what the model "sees".
 */
export function yoloModel(options: {
  size: number;
  classes: number;
  anchors: number;
  head: ArrayLike<number>;
  batch?: Dim;
}) {
  const { size, classes, anchors, head, batch = "batch" } = options;
  return buildModel({
    inputs: [{ name: "images", dims: [batch, 3, size, size] }],
    outputs: [{ name: "output0", dims: [batch, 4 + classes, anchors] }],
    nodes: [
      node("ReduceMean", ["images"], ["mean"], { axes: [1, 2, 3], keepdims: 1 }),
      node("Mul", ["mean", "zero"], ["zeros"]),
      node("Reshape", ["zeros", "batch_shape"], ["per_image"]),
      node("Add", ["per_image", "head"], ["output0"]),
    ],
    initializers: [
      floats("zero", [], [0]),
      int64s("batch_shape", [3], [-1, 1, 1]),
      floats("head", [1, 4 + classes, anchors], head),
    ],
  });
}

/**
 * An ImageNet-style classifier: global average of each (normalised) channel, then a linear
 * layer, so the logits are `weights · [mean R, mean G, mean B] + bias`.
 */
export function classifierModel(options: {
  size: number;
  weights: number[][];
  bias?: number[];
  batch?: Dim;
}) {
  const { size, weights, batch = "batch" } = options;
  const classes = weights[0]!.length;
  return buildModel({
    inputs: [{ name: "input", dims: [batch, 3, size, size] }],
    outputs: [{ name: "logits", dims: [batch, classes] }],
    nodes: [
      node("GlobalAveragePool", ["input"], ["pooled"]),
      node("Flatten", ["pooled"], ["features"], { axis: 1 }),
      node("Gemm", ["features", "weights", "bias"], ["logits"]),
    ],
    initializers: [
      floats("weights", [3, classes], weights.flat()),
      floats("bias", [classes], options.bias ?? Array(classes).fill(0)),
    ],
  });
}

/**
 * A small convolutional classifier with seeded random weights: three stride-2 3×3
 * convolutions with ReLU, global pooling, a linear layer. Enough arithmetic per image that
 * batching shows, small enough to build in milliseconds.
 */
export function convNetModel(options: {
  size: number;
  classes: number;
  channels?: [number, number, number];
  seed?: number;
  batch?: Dim;
}) {
  const { size, classes, batch = "batch" } = options;
  const [c1, c2, c3] = options.channels ?? [16, 32, 64];
  const random = mulberry32(options.seed ?? 1);
  const weights = (dims: number[], fanIn: number) =>
    floats(
      `w${dims.join("x")}`,
      dims,
      Array.from(
        { length: dims.reduce((a, b) => a * b, 1) },
        () => (random() * 2 - 1) * Math.sqrt(6 / fanIn),
      ),
    );
  const w1 = weights([c1, 3, 3, 3], 27);
  const w2 = weights([c2, c1, 3, 3], c1 * 9);
  const w3 = weights([c3, c2, 3, 3], c2 * 9);
  const fc = weights([c3, classes], c3);
  const conv = (input: string, w: Tensor, output: string) =>
    node("Conv", [input, w.name!], [output], { strides: [2, 2], pads: [1, 1, 1, 1] });
  return buildModel({
    inputs: [{ name: "input", dims: [batch, 3, size, size] }],
    outputs: [{ name: "logits", dims: [batch, classes] }],
    nodes: [
      conv("input", w1, "c1"),
      node("Relu", ["c1"], ["r1"]),
      conv("r1", w2, "c2"),
      node("Relu", ["c2"], ["r2"]),
      conv("r2", w3, "c3"),
      node("Relu", ["c3"], ["r3"]),
      node("GlobalAveragePool", ["r3"], ["pooled"]),
      node("Flatten", ["pooled"], ["features"], { axis: 1 }),
      node("MatMul", ["features", fc.name!], ["logits"]),
    ],
    initializers: [w1, w2, w3, fc],
  });
}

/**
 * A classifier whose weight is in dense layers (pool to 28×28, then 2352 → 2048 → 2048 →
 * classes): like a transformer or MLP head, one image reads every weight for little
 * arithmetic, so a batch that reads them once for many images runs much faster per image.
 */
export function denseClassifierModel(options: {
  size: number;
  classes: number;
  hidden?: number;
  seed?: number;
  batch?: Dim;
}) {
  const { size, classes, batch = "batch" } = options;
  const hidden = options.hidden ?? 2048;
  const pooled = 3 * (size / 8) * (size / 8);
  const random = mulberry32(options.seed ?? 2);
  const dense = (name: string, rows: number, cols: number) => {
    const weights = new Float32Array(rows * cols);
    const scale = Math.sqrt(6 / rows);
    for (let i = 0; i < weights.length; i++) weights[i] = (random() * 2 - 1) * scale;
    return [
      floats(`${name}_w`, [rows, cols], weights),
      floats(`${name}_b`, [cols], new Float32Array(cols)),
    ];
  };
  return buildModel({
    inputs: [{ name: "input", dims: [batch, 3, size, size] }],
    outputs: [{ name: "logits", dims: [batch, classes] }],
    nodes: [
      node("AveragePool", ["input"], ["pooled"], { kernel_shape: [8, 8], strides: [8, 8] }),
      node("Flatten", ["pooled"], ["features"], { axis: 1 }),
      node("Gemm", ["features", "fc1_w", "fc1_b"], ["h1"]),
      node("Relu", ["h1"], ["r1"]),
      node("Gemm", ["r1", "fc2_w", "fc2_b"], ["h2"]),
      node("Relu", ["h2"], ["r2"]),
      node("Gemm", ["r2", "fc3_w", "fc3_b"], ["logits"]),
    ],
    initializers: [
      ...dense("fc1", pooled, hidden),
      ...dense("fc2", hidden, hidden),
      ...dense("fc3", hidden, classes),
    ],
  });
}

/** Two named inputs of different types: `y = 2x + 1` (float32 [N, 4]), `next = k + 1` (int64). */
export function affineModel(batch: Dim = "batch") {
  return buildModel({
    inputs: [
      { name: "x", dims: [batch, 4] },
      { name: "k", type: "int64", dims: [batch, 1] },
    ],
    outputs: [
      { name: "y", dims: [batch, 4] },
      { name: "next", type: "int64", dims: [batch, 1] },
    ],
    nodes: [
      node("Mul", ["x", "two"], ["doubled"]),
      node("Add", ["doubled", "one"], ["y"]),
      node("Add", ["k", "one_int"], ["next"]),
    ],
    initializers: [floats("two", [], [2]), floats("one", [], [1]), int64s("one_int", [], [1])],
  });
}

/** A temp folder for model files, removed by `cleanup`. */
export function modelFolder(): { write(name: string, bytes: Uint8Array): string; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), "gantry-models-"));
  return {
    write(name, bytes) {
      const file = join(dir, name);
      writeFileSync(file, bytes);
      return file;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** One device thread per test file, as a runner child has one: it dies with the file's worker. */
let device: DeviceThread | null = null;

/**
 * Loads a pipeline in this process on the CPU, one thread, as a runner child would: its
 * sessions on a device thread.
 */
export async function loadOnCpu(
  pipeline: PipelineDefinition,
  modelId: string,
  config: ModelConfig,
): Promise<LoadedPipeline> {
  device ??= new DeviceThread();
  const loaded = await pipeline.load({
    provider: "cpu",
    threads: 1,
    createSession: device.sessionFactory("cpu", 1),
    modelId,
    config,
  });
  await loaded.warm();
  return loaded;
}

/** A request for `model` with one image input. */
export function imageRequest(
  model: string,
  bytes: Uint8Array,
  params: Record<string, unknown> = {},
): RunRequest {
  return {
    jobId: `job_${model}`,
    model,
    files: { image: { bytes, contentType: "image/png" } },
    params,
  };
}
