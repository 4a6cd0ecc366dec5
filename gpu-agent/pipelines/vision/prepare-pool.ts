/**
 * Image pre-processing on worker threads. A fast model on a big GPU runs a batch in a
 * millisecond; decoding, resizing and normalising its images takes longer than that on one
 * thread, so the runner child's main thread, not the device, would set the pace. With a
 * pool, each image of a batch is prepared on a thread of its own while the main thread only
 * moves messages, and the tensor comes back in shared memory, not copied: the device thread
 * stacks a batch straight from it (`ModelSession.runStacked`).
 */
import { Worker } from "node:worker_threads";
import type { JobError } from "../../../shared/protocol/index.ts";
import { PipelineFailure } from "../pipeline.ts";
import type { Normalization } from "./planes.ts";

const ENTRY = new URL("./prepare-worker-entry.js", import.meta.url);
/** Buffers kept per size: a few batches' worth (64 classifier inputs: 38 MB). */
const MAX_SPARE = 64;

export interface PrepareTask {
  id: number;
  bytes: Uint8Array;
  /** A tensor buffer done with (`recycle`), to write this one into when its size fits. */
  into?: SharedArrayBuffer;
  shorter: number;
  crop: { width: number; height: number };
  normalization: Normalization;
}

export type PrepareReply =
  | { id: number; ok: true; data: Float32Array }
  | { id: number; ok: false; failure: JobError }
  | { id: number; ok: false; message: string };

interface Thread {
  worker: Worker;
  busy: number;
}

export class PreparePool {
  private readonly threads: Thread[];
  private readonly pending = new Map<number, (reply: PrepareReply) => void>();
  private nextId = 1;
  private lost: Error | null = null;
  /**
   * Tensor buffers handed back, by byte length. A fresh one costs more than normalising
   * into it (its pages are faulted in and zeroed, then it is garbage in three threads).
   */
  private readonly spare = new Map<number, SharedArrayBuffer[]>();

  constructor(size: number) {
    this.threads = Array.from({ length: size }, () => {
      const worker = new Worker(ENTRY);
      // The child lives as long as its channel to the runner does, not for these threads.
      worker.unref();
      const thread = { worker, busy: 0 };
      worker.on("message", (reply: PrepareReply) => {
        thread.busy--;
        const settle = this.pending.get(reply.id);
        this.pending.delete(reply.id);
        settle?.(reply);
      });
      // A thread that dies fails what waits on it (transiently); the runner's child goes on.
      const lose = (error: Error) => this.lose(error);
      worker.on("error", lose);
      worker.on("exit", (code) => lose(new Error(`a pre-processing thread exited (${code})`)));
      return thread;
    });
  }

  /**
   * The ImageNet evaluation transform of one image as a `[3, h, w]` float32 plane set:
   * decode, shorter side to `shorter`, centre crop, `(x / 255 - mean) / std`. A bad image
   * fails with the decoder's own `PipelineFailure` (`invalid_image`, …).
   */
  centerCrop(
    bytes: Uint8Array,
    shorter: number,
    crop: { width: number; height: number },
    normalization: Normalization,
  ): Promise<Float32Array> {
    if (this.lost) return Promise.reject(this.lost);
    const thread = this.threads.reduce((a, b) => (b.busy < a.busy ? b : a));
    const id = this.nextId++;
    const into = this.spare.get(3 * crop.width * crop.height * 4)?.pop();
    return new Promise((resolve, reject) => {
      this.pending.set(id, (reply) => {
        if (reply.ok) resolve(reply.data);
        else if ("failure" in reply) reject(new PipelineFailure(reply.failure));
        else reject(new Error(reply.message));
      });
      thread.busy++;
      // A copy of the bytes alone, handed over: the request keeps its own (a retry alone may
      // need them), and structured clone would copy the whole buffer under a view, which for
      // an input read off the runner's IPC channel is the whole batch's message.
      const own = bytes.slice();
      thread.worker.postMessage(
        {
          id,
          bytes: own,
          shorter,
          crop,
          normalization,
          ...(into ? { into } : {}),
        } satisfies PrepareTask,
        [own.buffer],
      );
    });
  }

  /**
   * A tensor from `centerCrop` that nothing reads any more (its batch is done, on the device
   * thread too): a later image is written into its buffer. Only the caller knows when that
   * is; a tensor never handed back is left to the garbage collector.
   */
  recycle(data: Float32Array): void {
    const buffer = data.buffer;
    if (!(buffer instanceof SharedArrayBuffer) || data.byteLength !== buffer.byteLength) return;
    const spare = this.spare.get(buffer.byteLength) ?? [];
    if (spare.length < MAX_SPARE) spare.push(buffer);
    this.spare.set(buffer.byteLength, spare);
  }

  /** A thread died or the pool was closed: callers prepare on their own thread instead. */
  get broken(): boolean {
    return this.lost !== null;
  }

  async close(): Promise<void> {
    this.lose(new Error("the pre-processing pool was closed"));
    await Promise.all(this.threads.map(({ worker }) => worker.terminate()));
  }

  private lose(error: Error): void {
    this.lost ??= error;
    const failed: PrepareReply = { id: 0, ok: false, message: error.message };
    for (const settle of this.pending.values()) settle(failed);
    this.pending.clear();
  }
}
