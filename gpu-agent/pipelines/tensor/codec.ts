import * as ort from "onnxruntime-node";
import type { JsonTensor, JsonTensorType } from "../../../shared/protocol/tensor.ts";
import type { JsonOutputTensor } from "../../../shared/tasks/tensor.ts";
import { permanentFailure } from "../pipeline.ts";

export {
  JsonTensor,
  type JsonTensorType,
  MAX_JSON_ELEMENTS,
  TENSOR_TYPES,
} from "../../../shared/protocol/tensor.ts";

const INTEGER_RANGES: Partial<Record<JsonTensorType, [number, number]>> = {
  int8: [-128, 127],
  uint8: [0, 255],
  int16: [-32768, 32767],
  uint16: [0, 65535],
  int32: [-(2 ** 31), 2 ** 31 - 1],
  uint32: [0, 2 ** 32 - 1],
};

const TYPED_ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
} as const;

/** Builds an onnxruntime tensor from its JSON form; a bad element fails the job permanently. */
export function fromJson(name: string, tensor: JsonTensor): ort.Tensor {
  const { dims, type, data } = tensor;
  const size = dims.reduce((product, dim) => product * dim, 1);
  if (size !== data.length) {
    throw bad(name, `dims [${dims.join(", ")}] hold ${size} elements but data has ${data.length}`);
  }
  if (type === "string") {
    if (!data.every((value) => typeof value === "string")) throw bad(name, "expected strings");
    return new ort.Tensor("string", data as string[], dims);
  }
  if (type === "bool") {
    const bytes = Uint8Array.from(data, (value) => {
      if (typeof value === "boolean") return value ? 1 : 0;
      if (value === 0 || value === 1) return value;
      throw bad(name, "expected true/false (or 0/1)");
    });
    return new ort.Tensor("bool", bytes, dims);
  }
  if (type === "int64" || type === "uint64") {
    const values = data.map((value) => toBigInt(name, value, type === "uint64"));
    const array = type === "int64" ? BigInt64Array.from(values) : BigUint64Array.from(values);
    return new ort.Tensor(type, array, dims);
  }
  const range = INTEGER_RANGES[type];
  const numbers = data.map((value) => {
    if (typeof value !== "number" || !Number.isFinite(value)) throw bad(name, "expected numbers");
    if (range && (!Number.isInteger(value) || value < range[0] || value > range[1])) {
      throw bad(name, `${value} is not a ${type}`);
    }
    return value;
  });
  return new ort.Tensor(type, TYPED_ARRAYS[type].from(numbers), dims);
}

function toBigInt(name: string, value: unknown, unsigned: boolean): bigint {
  const valid =
    (typeof value === "number" && Number.isSafeInteger(value)) ||
    (typeof value === "string" && /^-?\d{1,20}$/.test(value));
  if (!valid) throw bad(name, `${JSON.stringify(value)} is not a 64-bit integer`);
  const big = BigInt(value as number | string);
  const [min, max] = unsigned ? [0n, 2n ** 64n - 1n] : [-(2n ** 63n), 2n ** 63n - 1n];
  if (big < min || big > max) throw bad(name, `${value} is out of range`);
  return big;
}

/**
 * The JSON form of an output. 64-bit integers become numbers when they fit a double exactly,
 * else decimal strings; NaN and infinities have no JSON form and become null.
 */
export function toJson(tensor: ort.Tensor): JsonOutputTensor {
  const data = tensor.data;
  let values: JsonOutputTensor["data"];
  if (Array.isArray(data)) values = data as string[];
  else if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
    values = Array.from(data, (value) => {
      const number = Number(value);
      return Number.isSafeInteger(number) ? number : value.toString();
    });
  } else if (tensor.type === "bool") values = Array.from(data as Uint8Array, (v) => v !== 0);
  else values = Array.from(data as Float32Array, (v) => (Number.isFinite(v) ? v : null));
  return { dims: [...tensor.dims], type: tensor.type, data: values };
}

function bad(name: string, detail: string) {
  return permanentFailure("invalid_tensor", `input ${name}: ${detail}`);
}
