/**
 * Batch tensors built on the device thread, in buffers it keeps from run to run.
 *
 * A batch of a fast model's inputs is several megabytes (eight 224×224 images: 4.8 MB). Built
 * afresh for every batch on the runner child's main thread, its allocation is the costly
 * part, not the copy: new pages to fault in, then a large buffer for the garbage collector
 * once it is handed over. Here the parts arrive in shared memory (no copy on the way) and
 * are copied into a buffer of the batch's size that this thread already owns and has touched.
 * Reusing it is safe because the device thread runs one call at a time: a run's input is
 * never overwritten before that run has returned (outputs are onnxruntime's own copies).
 * onnxruntime also refuses tensors in shared memory, so a single one is copied here too.
 */
import * as ort from "onnxruntime-node";
import type { WireTensor } from "./device-protocol.ts";

type Numeric = Exclude<ort.Tensor.DataType, string[]>;

/** Buffers kept per session input: a model's few batch sizes, not every size it ever saw. */
const SIZES_KEPT = 8;

export class BatchArena {
  /** By `session:input`, then by length in elements. */
  private readonly buffers = new Map<string, Map<number, Numeric>>();

  /** `parts` concatenated along the first axis, as one tensor (shapes agree past it). */
  stack(session: number, input: string, parts: readonly WireTensor[]): ort.Tensor {
    const first = parts[0]!;
    const rows = parts.reduce((sum, part) => sum + (part.dims[0] ?? 1), 0);
    const dims = [rows, ...first.dims.slice(1)];
    if (Array.isArray(first.data)) {
      return new ort.Tensor(
        "string",
        parts.flatMap((part) => part.data as string[]),
        dims,
      );
    }
    const length = parts.reduce((sum, part) => sum + (part.data as Numeric).length, 0);
    const data = this.buffer(`${session}:${input}`, first.data as Numeric, length);
    let offset = 0;
    for (const part of parts) {
      const values = part.data as Numeric;
      (data as Float32Array).set(values as Float32Array, offset);
      offset += values.length;
    }
    return new ort.Tensor(first.type, data, dims);
  }

  /** Forgets a released session's buffers. */
  release(session: number): void {
    for (const key of [...this.buffers.keys()]) {
      if (key.startsWith(`${session}:`)) this.buffers.delete(key);
    }
  }

  private buffer(key: string, like: Numeric, length: number): Numeric {
    const sizes = this.buffers.get(key) ?? new Map<number, Numeric>();
    this.buffers.set(key, sizes);
    const kept = sizes.get(length);
    if (kept && kept.constructor === like.constructor) return kept;
    const Typed = like.constructor as new (length: number) => Numeric;
    const made = new Typed(length);
    sizes.delete(length);
    if (sizes.size >= SIZES_KEPT) sizes.delete(sizes.keys().next().value!);
    sizes.set(length, made);
    return made;
  }
}
