/**
 * Messages between a runner child's main thread and its device thread (the worker thread
 * that owns the onnxruntime sessions). Both ends are the same build, in the same process,
 * so there is no version and no validation: these are internal calls, typed.
 */
import * as ort from "onnxruntime-node";

/** A tensor as it crosses threads: its data is copied (structured clone), never shared. */
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
  if (Array.isArray(data) || !ArrayBuffer.isView(data)) return { type, data, dims };
  const whole = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
  return { type, data: whole ? data : data.slice(), dims };
}
