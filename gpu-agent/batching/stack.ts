import * as ort from "onnxruntime-node";
import type { ModelSession } from "../inference/types.ts";

/** One request's inputs or outputs, by tensor name. */
export type NamedTensors = Record<string, ort.Tensor>;

type TensorData = ort.Tensor["data"];

/**
 * Runs several requests' feeds through one `session.run`, concatenated along the first
 * (batch) axis, and splits every output back along that axis. Each request may carry its own
 * batch (its first dimension); requests whose other dimensions differ cannot share a tensor,
 * so they run in separate groups of alike shapes.
 *
 * Outputs are copied out of the batched result: a request's tensors stay valid on their own.
 */
export async function runStacked(
  session: ModelSession,
  feeds: readonly NamedTensors[],
  outputNames: readonly string[] = session.outputNames,
): Promise<NamedTensors[]> {
  const results: NamedTensors[] = new Array(feeds.length);
  for (const group of groupByShape(feeds)) {
    const members = group.map((index) => feeds[index]!);
    if (group.length === 1 && !(inSharedMemory(members[0]!) && session.runStacked)) {
      const index = group[0]!;
      results[index] = await session.run(ownMemory(feeds[index]!), outputNames);
      continue;
    }
    const counts = members.map(batchOf);
    const outputs = await runGroup(session, members, outputNames);
    const total = counts.reduce((sum, n) => sum + n, 0);
    const split = group.map((): NamedTensors => ({}));
    for (const [name, output] of Object.entries(outputs)) {
      if (output.dims[0] !== total) {
        throw new Error(
          `output ${name} has ${output.dims[0]} rows for a batch of ${total}; it cannot be split per job`,
        );
      }
      let start = 0;
      counts.forEach((count, i) => {
        split[i]![name] = sliceBatch(output, start, count);
        start += count;
      });
    }
    group.forEach((index, i) => {
      results[index] = split[i]!;
    });
  }
  return results;
}

/**
 * One run of `members` stacked. Inputs in shared memory (the vision prepare threads') go to
 * the session to stack where it can (the device thread, in a buffer it reuses); others are
 * concatenated here, so their buffers are not copied once more on their way.
 */
function runGroup(
  session: ModelSession,
  members: readonly NamedTensors[],
  outputNames: readonly string[],
): Promise<NamedTensors> {
  if (session.runStacked && members.every(inSharedMemory)) {
    return session.runStacked(members, outputNames);
  }
  const stacked: NamedTensors = {};
  for (const name of Object.keys(members[0]!)) {
    stacked[name] = concatBatch(members.map((feed) => feed[name]!));
  }
  return session.run(stacked, outputNames);
}

const shared = ({ data }: ort.Tensor): boolean =>
  ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer;

const inSharedMemory = (feed: NamedTensors): boolean => Object.values(feed).every(shared);

/** onnxruntime refuses tensors in shared memory ("Invalid argument"): those are copied. */
function ownMemory(feed: NamedTensors): NamedTensors {
  if (!Object.values(feed).some(shared)) return feed;
  return Object.fromEntries(
    Object.entries(feed).map(([name, tensor]) => [
      name,
      shared(tensor) ? concatBatch([tensor]) : tensor,
    ]),
  );
}

/** A request's batch: the first dimension of its first input. */
function batchOf(feed: NamedTensors): number {
  const first = Object.values(feed)[0];
  return first?.dims[0] ?? 1;
}

/** Groups request indexes whose inputs agree on names, types and all but the first axis. */
function groupByShape(feeds: readonly NamedTensors[]): number[][] {
  const groups = new Map<string, number[]>();
  feeds.forEach((feed, index) => {
    const key = Object.keys(feed)
      .sort()
      .map((name) => {
        const tensor = feed[name]!;
        return `${name}:${tensor.type}:${tensor.dims.slice(1).join("x")}:${tensor.dims.length}`;
      })
      .join("|");
    const group = groups.get(key);
    if (group) group.push(index);
    else groups.set(key, [index]);
  });
  return [...groups.values()];
}

function concatBatch(tensors: readonly ort.Tensor[]): ort.Tensor {
  const first = tensors[0]!;
  const rows = tensors.reduce((sum, tensor) => sum + (tensor.dims[0] ?? 1), 0);
  const dims = [rows, ...first.dims.slice(1)];
  if (Array.isArray(first.data)) {
    const data = tensors.flatMap((tensor) => tensor.data as string[]);
    return new ort.Tensor("string", data, dims);
  }
  const length = tensors.reduce((sum, tensor) => sum + tensor.size, 0);
  const Typed = first.data.constructor as new (length: number) => Exclude<TensorData, string[]>;
  const data = new Typed(length);
  let offset = 0;
  for (const tensor of tensors) {
    (data as Float32Array).set(tensor.data as Float32Array, offset);
    offset += tensor.size;
  }
  return new ort.Tensor(first.type, data, dims);
}

function sliceBatch(tensor: ort.Tensor, start: number, count: number): ort.Tensor {
  const rows = tensor.dims[0] ?? 1;
  const rowSize = rows === 0 ? 0 : tensor.size / rows;
  const dims = [count, ...tensor.dims.slice(1)];
  const from = start * rowSize;
  const to = (start + count) * rowSize;
  const data = tensor.data;
  const part = Array.isArray(data) ? data.slice(from, to) : (data as Float32Array).slice(from, to);
  return new ort.Tensor(tensor.type, part as Float32Array, dims);
}
