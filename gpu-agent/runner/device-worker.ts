/**
 * The device thread: owns the onnxruntime sessions of one runner child and runs them, one
 * call at a time, in the order they arrive. onnxruntime-node's `run` blocks the thread that
 * calls it for the whole inference; here that is this thread, so the child's main thread
 * stays free to receive the next job and decode, resize and normalise it meanwhile.
 */
import { parentPort } from "node:worker_threads";
import * as ort from "onnxruntime-node";
import { BatchArena } from "./device-arena.ts";
import {
  type DeviceReply,
  type DeviceRequest,
  fromWire,
  handOver,
  toWire,
  type WireTensor,
} from "./device-protocol.ts";

const sessions = new Map<number, ort.InferenceSession>();
let nextSession = 1;
const arena = new BatchArena();

async function handle(request: DeviceRequest): Promise<DeviceReply> {
  switch (request.type) {
    case "create": {
      const session = await ort.InferenceSession.create(request.modelPath, request.options);
      const id = nextSession++;
      sessions.set(id, session);
      const { inputNames, outputNames, inputMetadata, outputMetadata } = session;
      return {
        type: "created",
        id: request.id,
        session: id,
        inputNames,
        outputNames,
        inputMetadata,
        outputMetadata,
      };
    }
    case "run": {
      const feeds: Record<string, ort.Tensor> = {};
      for (const [name, wire] of Object.entries(request.feeds)) {
        // onnxruntime refuses shared memory: such an input is copied into the arena.
        feeds[name] = inSharedMemory(wire)
          ? arena.stack(request.session, name, [wire])
          : fromWire(wire);
      }
      return ran(request.id, sessionOf(request.session), feeds, request.fetches);
    }
    case "run_stacked": {
      const feeds: Record<string, ort.Tensor> = {};
      for (const name of Object.keys(request.parts[0] ?? {})) {
        const parts = request.parts.map((part) => part[name]!);
        feeds[name] = arena.stack(request.session, name, parts);
      }
      return ran(request.id, sessionOf(request.session), feeds, request.fetches);
    }
    case "release": {
      await sessionOf(request.session).release();
      sessions.delete(request.session);
      arena.release(request.session);
      return { type: "released", id: request.id };
    }
  }
}

async function ran(
  id: number,
  session: ort.InferenceSession,
  feeds: Record<string, ort.Tensor>,
  fetches: readonly string[] | undefined,
): Promise<DeviceReply> {
  const outputs = fetches ? await session.run(feeds, fetches) : await session.run(feeds);
  const wire: Record<string, WireTensor> = {};
  for (const [name, value] of Object.entries(outputs)) wire[name] = toWire(value);
  return { type: "ran", id, outputs: wire };
}

const inSharedMemory = ({ data }: WireTensor): boolean =>
  ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer;

function sessionOf(id: number): ort.InferenceSession {
  const session = sessions.get(id);
  if (!session) throw new Error(`no session ${id} on the device thread (released?)`);
  return session;
}

const port = parentPort;
if (!port) throw new Error("gpu-agent/runner/device-worker.ts runs only as a worker thread");

// One call at a time, in order: a run never overlaps another on the device.
let turn: Promise<void> = Promise.resolve();
port.on("message", (request: DeviceRequest) => {
  turn = turn.then(async () => {
    let reply: DeviceReply;
    try {
      reply = await handle(request);
    } catch (error) {
      const { name, message } = error instanceof Error ? error : new Error(String(error));
      reply = { type: "failed", id: request.id, name, message };
    }
    // Outputs are this thread's to give away: hand them over rather than copy them.
    port.postMessage(reply, reply.type === "ran" ? handOver(Object.values(reply.outputs)) : []);
  });
});
