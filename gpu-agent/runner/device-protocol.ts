/**
 * Messages between a runner child's main thread and its device thread (the worker thread
 * that owns the onnxruntime sessions). Both ends are the same build, in the same process,
 * so there is no version and no validation: these are internal calls, typed.
 */
import * as ort from "onnxruntime-node";

/**
 * A tensor as it crosses threads. Its data is copied (structured clone), or, when large and
 * its own buffer, handed over (transferred: the sender's copy is detached). Data already in
 * shared memory (the vision prepare threads' tensors, written once) crosses as it is.
 */
export interface WireTensor {
  type: ort.Tensor.Type;
  data: ort.Tensor.DataType;
  dims: readonly number[];
}

export type DeviceRequest =
  | {
      type: "create";
      id: number;
      modelPath: string;
      options: ort.InferenceSession.SessionOptions;
    }
  | {
      type: "run";
      id: number;
      session: number;
      feeds: Record<string, WireTensor>;
      fetches?: readonly string[];
    }
  | {
      /** One run of `parts` concatenated along the first axis (`ModelSession.runStacked`). */
      type: "run_stacked";
      id: number;
      session: number;
      parts: Record<string, WireTensor>[];
      fetches?: readonly string[];
    }
  | { type: "release"; id: number; session: number };

export interface SessionShape {
  inputNames: readonly string[];
  outputNames: readonly string[];
  inputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  outputMetadata: readonly ort.InferenceSession.ValueMetadata[];
}

export type DeviceReply =
  | ({ type: "created"; id: number; session: number } & SessionShape)
  | { type: "ran"; id: number; outputs: Record<string, WireTensor> }
  | { type: "released"; id: number }
  /** `name` and `message` of what onnxruntime threw, so OOM detection still reads them. */
  | { type: "failed"; id: number; name: string; message: string };

export function fromWire({ type, data, dims }: WireTensor): ort.Tensor {
  return new ort.Tensor(type, data, dims);
}

/**
 * Structured clone copies a typed array's whole buffer, so a view into a larger buffer (a
 * batch slice) is cut to its own bytes first.
 */
export function toWire(tensor: ort.Tensor): WireTensor {
  const { type, data, dims } = tensor;
  if (Array.isArray(data) || !ArrayBuffer.isView(data) || ownBuffer(data)) {
    return { type, data, dims };
  }
  return { type, data: data.slice(), dims };
}

/** Below this a copy costs less than thinking about it; above, the copy is what costs. */
const HAND_OVER_BYTES = 64 * 1024;

/**
 * The buffers of `tensors` worth handing over instead of copying: each tensor's own, whole
 * buffer, once. A view into a larger buffer was already cut to its own bytes by `toWire`.
 */
export function handOver(tensors: Iterable<WireTensor>): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  for (const { data } of tensors) {
    const buffer = ownBuffer(data);
    if (buffer instanceof ArrayBuffer && buffer.byteLength >= HAND_OVER_BYTES) buffers.add(buffer);
  }
  return [...buffers];
}

/** The buffer of a typed array that is the whole of it, not a view into a larger one. */
function ownBuffer(data: ort.Tensor.DataType): ArrayBufferLike | null {
  if (Array.isArray(data) || !ArrayBuffer.isView(data)) return null;
  const whole = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
  return whole ? data.buffer : null;
}
