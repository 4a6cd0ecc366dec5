/**
 * A pre-processing thread: decodes, resizes and centre-crops one image and normalises it
 * into a planar float32 tensor, off the runner child's main thread (prepare-pool.ts).
 */
import { parentPort } from "node:worker_threads";
import { PipelineFailure } from "../pipeline.ts";
import { decodeImage } from "./decode.ts";
import { writeRgbPlanes } from "./planes.ts";
import type { PrepareReply, PrepareTask } from "./prepare-pool.ts";
import { resizeAndCenterCrop } from "./resize.ts";

const port = parentPort;
if (!port) throw new Error("prepare-worker.ts runs only as a worker thread");

port.on("message", async (task: PrepareTask) => {
  let reply: PrepareReply;
  try {
    const { width, height } = task.crop;
    const cropped = await resizeAndCenterCrop(await decodeImage(task.bytes), task.shorter, {
      width,
      height,
    });
    // Shared memory: the tensor then crosses to the runner's main thread and on to its device
    // thread without a copy, and stays readable here and there (a batch that fails may run
    // its requests again alone). Nothing writes it after this.
    const bytes = 3 * width * height * 4;
    const buffer = task.into?.byteLength === bytes ? task.into : new SharedArrayBuffer(bytes);
    const data = new Float32Array(buffer);
    writeRgbPlanes(data, 0, cropped.data, width, height, task.normalization);
    reply = { id: task.id, ok: true, data };
  } catch (error) {
    reply =
      error instanceof PipelineFailure
        ? { id: task.id, ok: false, failure: error.jobError }
        : {
            id: task.id,
            ok: false,
            message: error instanceof Error ? error.message : String(error),
          };
  }
  port.postMessage(reply);
});
